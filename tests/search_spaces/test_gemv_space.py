"""The gemv space: its constraints are the library kernel's own rules, defaults."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from search_spaces import Workload
from search_spaces.gemv import GEMV_VERSION, gemv_default, gemv_modes, gemv_space, point_opts
from sim.errors import AutoschedError
from sim.hwio import load_hardware
from sim.kernels import GemvOpts, gemv, gemv_layout_of
from sim.kernels.gemv_bound import layout_estimate_ns
from sim.timing import simulate

HW = {name: load_hardware(name) for name in ("hbm-pim", "aim-gddr6")}
# few rows per bank, so the bank-capacity rule is exercised too
SMALL = {f"{k}-8rows": replace(h, org=replace(h.org, rows_per_bank=8)) for k, h in HW.items()}
ALL = {**HW, **SMALL}


def raw_points(space, rng, count):
    """Pim points drawn uniformly from the domains, constraints ignored."""
    pim = [p for p in space.params if p.name != "placement"]
    for _ in range(count):
        pt = {p.name: p.domain.values()[int(rng.integers(len(p.domain)))] for p in pim}
        yield {"placement": "pim", **pt}


def test_constraints_are_the_kernel_rules():
    """By construction: one space rule per kernel rule, each calling it; nothing else
    constrains a point (the host reads the resident PIM layout, which fits by
    construction; only weights without one get the plain-memory layout's rule)."""
    from search_spaces import Rule
    from sim.kernels import GEMV_RULES

    space = gemv_space(Workload.make("gemv", m=2, n=600, k=1500), HW["hbm-pim"])
    assert all(isinstance(c, Rule) for c in space.constraints)
    assert [c.name for c in space.constraints] == [r.name for r in GEMV_RULES]


@pytest.mark.parametrize("hw", ALL.values(), ids=ALL.keys())
@pytest.mark.parametrize("m,n,k", [(1, 40, 33), (3, 97, 250), (2, 600, 1500)])
def test_constraints_agree_with_the_library(hw, m, n, k):
    """A point is valid in the space exactly when gemv_layout_of accepts its options."""
    space = gemv_space(Workload.make("gemv", m=m, n=n, k=k), hw)
    rng = np.random.default_rng(m * n + k)
    seen = {True: 0, False: 0}
    for pt in raw_points(space, rng, 600):
        ok_space = not space.validate(pt)
        ok_lib = not point_opts(pt).validate(hw, n, k, m)
        assert ok_space == ok_lib, (pt, space.validate(pt), point_opts(pt).validate(hw, n, k, m))
        seen[ok_space] += 1
    assert seen[True] and seen[False]


@pytest.mark.parametrize("hw", HW.values(), ids=HW.keys())
def test_enumerated_points_are_all_accepted(hw):
    w = Workload.make("gemv", m=2, n=64, k=96)
    space = gemv_space(w, hw)
    pts = list(space.enumerate())
    assert {"placement": "host"} in pts
    pim = [p for p in pts if p["placement"] == "pim"]
    assert len(pim) > 100
    assert all(not point_opts(p).validate(hw, 64, 96, 2) for p in pim)
    assert {p["mode"] for p in pim} == set(gemv_modes(hw))


def test_modes_follow_the_hardware():
    assert gemv_modes(HW["hbm-pim"]) == ("bcast", "lane")
    assert gemv_modes(HW["aim-gddr6"]) == ("dot", "bcast", "lane")
    w = Workload.make("gemv", m=1, n=8, k=8)
    names = {h: [p.name for p in gemv_space(w, HW[h]).params] for h in HW}
    assert "interleave" not in names["aim-gddr6"]  # one bank per unit: nothing to interleave
    assert "interleave" in names["hbm-pim"]


@pytest.mark.parametrize("point,reason", [
    ({"k_split": 4, "channels": 2}, "k_split_divides"),
    ({"gb_tile": 128, "double_buffer": True}, "gb_fits"),
    ({"mode": "lane", "gb_tile": 128, "registers": 2}, "segments"),
    ({"gb_tile": 32, "interleave": True}, "interleave"),
    ({"row_prefetch": True}, "row_prefetch"),
    ({"registers": 8, "tile_outer": True, "channels": 1}, "live_registers"),
])
def test_invalid_combinations_name_the_rule(point, reason):
    hw = HW["hbm-pim"]
    space = gemv_space(Workload.make("gemv", m=2, n=4096, k=4096), hw)
    base = {"placement": "pim", "mode": "bcast", "channels": 64, "k_split": 1, "gb_tile": 128,
            "registers": 1, "batch_rows": 1, "tile_outer": False, "double_buffer": False,
            "interleave": False, "row_prefetch": False}
    assert not space.validate(base)
    why = space.validate({**base, **point})
    assert any(r.startswith(reason) for r in why), why
    assert point_opts({**base, **point}).validate(hw, 4096, 4096, 2)


def test_bank_capacity_rule():
    hw = SMALL["hbm-pim-8rows"]
    space = gemv_space(Workload.make("gemv", m=1, n=4096, k=4096), hw)
    pt = {"placement": "pim", "mode": "bcast", "channels": 64, "k_split": 1, "gb_tile": 128,
          "registers": 8, "batch_rows": 1, "tile_outer": False, "double_buffer": False,
          "interleave": False, "row_prefetch": False}
    why = space.validate(pt)
    assert any(r.startswith("bank_rows") for r in why), why
    assert any(r.startswith("host_rows") for r in space.validate({"placement": "host"}))


@pytest.mark.parametrize("hw", HW.values(), ids=HW.keys())
@pytest.mark.parametrize("m,n,k", [(1, 4096, 4096), (1, 11008, 4096), (3, 97, 250)])
def test_gemv_default_ranks_library_options_by_rows_and_read_out(hw, m, n, k):
    """The default is the fastest of the library options the layout estimate shortlists
    over every reduction split, tile, double buffering and stripe count (rows walked,
    activations not hidden, broadcasts not hidden, read-out of the split's partials), so
    it is never slower than the option of least estimate at the widest tile nor than the
    densest option; it interleaves bank pairs with the pipelined row walk where the
    device has them and a bank has more than one row to activate."""
    w = Workload.make("gemv", m=m, n=n, k=k)
    d = gemv_default(w, hw)
    assert not gemv_space(w, hw).validate(d)
    assert d["placement"] == "pim"
    pairs = (False, True) if hw.pim.banks_per_unit == 2 else (False,)
    splits = [s for s in (1, 2, 4, 8, 16, 32, 64) if hw.org.channels % s == 0]
    regs = (None, *(r for r in (1, 2, 4, 8, 16) if r < hw.pim.registers))
    opts = [o for o in (GemvOpts(k_split=s, interleave=il, row_prefetch=il, double_buffer=db,
                                 registers=r)
                        for s in splits for il in pairs for db in (False, True) for r in regs)
            if not o.validate(hw, n, k, m)]
    plans = [gemv_layout_of(hw, n, k, m, o) for o in opts]
    mine = gemv_layout_of(hw, n, k, m, point_opts(d))

    def timed(o: GemvOpts) -> float:
        return simulate(gemv(hw, n, k, m, o).program, hw).latency_ns

    least = min(plans, key=lambda p: layout_estimate_ns(hw, p))
    assert timed(point_opts(d)) <= timed(least.opts)
    densest = min(plans, key=lambda p: p.rows_per_bank)
    # within 1 %: a double-buffered tile of half the buffer walks more, shorter tiles
    assert timed(point_opts(d)) <= 1.01 * timed(densest.opts)
    assert d.get("interleave", False) == (hw.pim.banks_per_unit == 2 and mine.rows_per_bank > 1)
    assert d.get("row_prefetch", False) == d.get("interleave", False)


@pytest.mark.parametrize("n,k", [(4096, 4096), (22016, 4096), (4096, 11008)])
def test_an_adder_tree_beside_a_bank_pair_keeps_the_interleaved_walk(n, k):
    """hbm-pim-int8 is hbm-pim plus an adder tree: its fp16 default weighs the tree's dot
    columns against the interleaved broadcast walk of the bank pair, takes the walk (dot
    columns cannot interleave in a 256-byte buffer) and so is never slower than on
    hbm-pim itself."""
    base, tree = load_hardware("hbm-pim"), load_hardware("hbm-pim-int8")
    w = Workload.make("gemv", m=1, n=n, k=k)
    d = gemv_default(w, tree)
    assert (d["mode"], d["interleave"]) == ("bcast", True)

    def timed(hw) -> float:
        return simulate(gemv(hw, n, k, 1, point_opts(gemv_default(w, hw))).program,
                        hw).latency_ns

    assert timed(tree) <= timed(base)


def test_gemv_default_packs_a_reduction_slice_the_tile_overshoots():
    """Gemma 2's FFN (2,304 wide) over four slices is 576 elements; the widest tile pads
    each to 1,024, a narrower tile packs them. The default finds the packing (timed
    faster than every option at the widest tile) on the device whose buffer overshoots."""
    hw = HW["aim-gddr6"]
    n, k = 9216, 2304
    d = gemv_default(Workload.make("gemv", m=1, n=n, k=k), hw)
    widest = [o for o in (GemvOpts(k_split=s, interleave=il, row_prefetch=il,
                                   double_buffer=db)
                          for s in (1, 2, 4, 8, 16) for il in (False, True)
                          for db in (False, True))
              if hw.org.channels % o.k_split == 0 and not o.validate(hw, n, k, 1)]
    best_widest = min(simulate(gemv(hw, n, k, 1, o).program, hw).latency_ns for o in widest)
    mine = simulate(gemv(hw, n, k, 1, point_opts(d)).program, hw).latency_ns
    assert mine < 0.8 * best_widest, (d, mine, best_widest)


@pytest.mark.parametrize("n,k", [(256, 256), (688, 256), (256, 688), (128, 896)])
def test_gemv_default_of_a_one_row_matrix_spreads_without_interleaving(n, k):
    """With one row per bank there is no activation to hide: the default does not pair
    banks, so the same tile fills twice the channels and runs faster than the
    interleaved layout of the same rows."""
    hw = HW["hbm-pim"]
    w = Workload.make("gemv", m=1, n=n, k=k)
    d = gemv_default(w, hw)
    assert gemv_layout_of(hw, n, k, 1, point_opts(d)).rows_per_bank == 1 and not d["interleave"]
    paired = next(o for s in (1, 2, 4, 8, 16, 32, 64)
                  if not (o := GemvOpts(k_split=s, interleave=True)).validate(hw, n, k, 1)
                  and gemv_layout_of(hw, n, k, 1, o).rows_per_bank == 1)
    alone = simulate(gemv(hw, n, k, 1, point_opts(d)).program, hw).latency_ns
    assert alone < simulate(gemv(hw, n, k, 1, paired).program, hw).latency_ns


@pytest.mark.parametrize("hw", HW.values(), ids=HW.keys())
@pytest.mark.parametrize("m,n,k", [(64, 256, 512), (9, 4096, 4096), (512, 4096, 4096)])
def test_gemm_default_takes_the_faster_side(hw, m, n, k):
    """gemm (prefill, large batches): host when its best case beats PIM's; on PIM the
    weights are reused across as many batch rows as valid."""
    from sim.kernels.gemv_bound import gemv_terms

    w = Workload.make("gemm", m=m, n=n, k=k)
    d = gemv_default(w, hw)
    assert not gemv_space(w, hw).validate(d)
    terms = gemv_terms(hw, m, n, k)
    assert d["placement"] == ("host" if terms["host"] < terms["pim"] else "pim")
    if d["placement"] == "pim":
        ok = [b for b in range(1, hw.pim.registers + 1)
              if not GemvOpts(batch_rows=b).validate(hw, n, k, m)]
        assert d["batch_rows"] == max(ok) > 1


def test_default_raises_when_nothing_fits():
    hw = replace(HW["aim-gddr6"], org=replace(HW["aim-gddr6"].org, rows_per_bank=1))
    with pytest.raises(AutoschedError, match="neither on PIM nor in plain memory"):
        gemv_default(Workload.make("gemv", m=1, n=4096, k=4096), hw)


def test_space_identity():
    w = Workload.make("gemm", m=8, n=64, k=64)
    space = gemv_space(w, HW["hbm-pim"])
    assert space.name == "gemm" and space.version == GEMV_VERSION
    assert space.param("batch_rows").domain.values() == tuple(range(1, 9))
    with pytest.raises(AutoschedError):
        gemv_space(Workload.make("rmsnorm", m=1, n=8), HW["hbm-pim"])
