"""Kernel programs: compact, JSON round-trippable, valid, and faster than plain DRAM."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sim.errors import AutoschedError
from sim.hwio import load_hardware
from sim.kernels import GemvOpts, elementwise, gemv, gemv_baseline
from sim.program import Loop, Program
from sim.timing import simulate
from sim.validate import validate

HW = {name: load_hardware(name) for name in ("hbm-pim", "aim-gddr6")}


def count(nodes) -> int:
    """Instructions and loops as written (not unrolled)."""
    return sum(1 + count(n.body) if isinstance(n, Loop) else 1 for n in nodes)


def size(prog: Program) -> int:
    return sum(count(s.body) for s in prog.streams)


@pytest.mark.parametrize("hw", HW.values(), ids=HW.keys())
def test_programs_compact_valid_and_round_trip(hw):
    kernels = [gemv(hw, 4096, 4096), gemv(hw, 11008, 4096, 4, GemvOpts(k_split=2)),
               gemv(hw, 4096, 4096, 1, GemvOpts(double_buffer=True, gb_tile=hw.gb_elems // 2)),
               gemv_baseline(hw, 4096, 4096), elementwise(hw, 100_000, "add")]
    for k in kernels:
        validate(k.program, hw)
        assert Program.from_json(k.program.to_json()) == k.program
    assert size(kernels[0].program) <= 40
    assert max(size(k.program) for k in kernels) <= 120


@pytest.mark.parametrize("hw", HW.values(), ids=HW.keys())
def test_pim_gemv_beats_plain_memory(hw):
    pim = simulate(gemv(hw, 4096, 4096).program, hw).latency_ns
    base = simulate(gemv_baseline(hw, 4096, 4096).program, hw).latency_ns
    assert 0 < pim < base


def test_tuned_options_beat_defaults_on_hbm():
    """Default output split leaves half the hbm-pim units idle for n = 4096."""
    hw = HW["hbm-pim"]
    default = simulate(gemv(hw, 4096, 4096).program, hw).latency_ns
    split = simulate(gemv(hw, 4096, 4096, 1, GemvOpts(k_split=2)).program, hw).latency_ns
    inter = simulate(gemv(hw, 4096, 4096, 1, GemvOpts(interleave=True)).program, hw).latency_ns
    assert split < default and inter < default


def test_weight_reuse_reads_weights_once_per_batch_group():
    hw = HW["aim-gddr6"]
    acts = [simulate(gemv(hw, 1024, 1024, 4, GemvOpts(batch_rows=br, gb_tile=256)).program,
                     hw).commands["act"] for br in (1, 4)]
    assert acts[1] * 4 == acts[0]


MODES = {"hbm-pim": ("bcast", "lane"), "aim-gddr6": ("dot", "bcast", "lane")}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(sorted(HW)), n=st.integers(1, 80), k=st.integers(1, 300),
       batch=st.integers(1, 3), data=st.data())
def test_any_valid_options_compute_exactly(name, n, k, batch, data):
    """Any option point either explains why it is invalid or computes exactly."""
    hw = HW[name]
    opts = GemvOpts(
        mode=data.draw(st.sampled_from(MODES[name])),
        channels=data.draw(st.sampled_from([1, 2, 4, 6])),
        k_split=data.draw(st.sampled_from([1, 2])),
        gb_tile=data.draw(st.sampled_from([None, 16, 32, 64, 128, 256])),
        registers=data.draw(st.sampled_from([None, 1, 2, 4])),
        batch_rows=data.draw(st.integers(1, batch)),
        loop_order=data.draw(st.sampled_from(["row_outer", "tile_outer"])),
        interleave=data.draw(st.booleans()) and name == "hbm-pim",
        double_buffer=data.draw(st.booleans()),
    )
    why = opts.validate(hw, n, k, batch)
    if why:
        with pytest.raises(AutoschedError):
            gemv(hw, n, k, batch, opts)
        return
    rng = np.random.default_rng(n * 1000 + k)
    x = rng.integers(-1, 2, (batch, k)).astype(np.float32)
    w = rng.integers(-1, 2, (n, k)).astype(np.float32)
    y = gemv(hw, n, k, batch, opts).run(hw, {"x": x, "W": w})
    np.testing.assert_array_equal(y, x @ w.T)


def test_a_loop_of_one_sets_its_variable_to_zero_and_keeps_the_rest() -> None:
    from sim.isa import Act, BufRef, RdBank, aff
    from sim.kernels.base import loop

    inner = Loop("j", 2, (RdBank(bank=0, col=aff(1, i=4, j=8), ncols=2,
                                 dst=BufRef("y", aff(0, i=16, j=1), (2,))),))
    act = Act(bank=1, step=1, row=aff(3))
    got = loop("i", 1, [act, inner])
    want = [act, Loop("j", 2, (RdBank(bank=0, col=aff(1, j=8), ncols=2,
                                      dst=BufRef("y", aff(0, j=1), (2,))),))]
    assert got == want and hash(tuple(got)) == hash(tuple(want))
    assert got[0] is act  # a node without the variable is not rebuilt
    assert loop("i", 3, [act]) == [Loop("i", 3, (act,))]


def test_slice_streams_are_slice_zero_moved_and_shift_refs_shares_the_rest() -> None:
    """Every reduction slice's stream is slice 0's with its input and partial-sum windows
    moved: equal to building each; shift_refs leaves untouched nodes as the same objects."""
    from sim.isa import BufRef, RdAcc, WrGb, aff
    from sim.kernels.base import shift_refs
    from sim.kernels.gemv import _slice_streams, _stream
    from sim.kernels.gemv_layout import gemv_layout_of

    for name in ("hbm-pim", "aim-gddr6"):
        hw = load_hardware(name)
        for n, k, m, o in [(256, 688, 1, GemvOpts(k_split=16)), (4096, 4096, 4,
                           GemvOpts(k_split=8, batch_rows=2, double_buffer=True)),
                           (1376, 256, 1, GemvOpts(k_split=4, loop_order="tile_outer"))]:
            pl = gemv_layout_of(hw, n, k, m, o)
            assert _slice_streams(pl) == tuple(_stream(pl, kk) for kk in range(pl.ks))
    wr = WrGb(BufRef("x", aff(3, t=4), (4,)), aff(0))
    rd = RdAcc(0, 1, aff(0), 1, BufRef("part", aff(0, ch=16), (16,)))
    body = (Loop("t", 2, (wr,)), rd)
    moved = shift_refs(body, {"x": 100})
    assert moved[0].body[0].src.offset == aff(103, t=4) and moved[1] is rd
    assert shift_refs(body, {"y": 1})[0] is body[0]
