"""Attention's staged softmax (``softmax_stages``): the host normalises each stage of the
cache slots while the banks score the next and weigh the one before, and merges the
stages' partial outputs by their weights; checked against numpy after a prefill (the
staged causal softmax), timed against the whole-row softmax and the family's bound."""

from __future__ import annotations

import numpy as np
import pytest
from test_families_attention import HW, check_point, workload

from autosched.families.registry import build, family_of
from search_spaces.attention import attention_layout_of
from sim.host_ops import run
from sim.host_softmax import masked_softmax
from sim.isa import BufRef, HostOp
from sim.program import walk
from sim.timing import simulate


def _softmax_op(kind: str, outs: tuple, ins: tuple, **attrs) -> HostOp:
    return HostOp(kind, outs, ins, tuple(attrs.items()))


@pytest.mark.parametrize("attrs", [{}, {"causal": 3, "group": 2},
                                   {"causal": 3, "group": 2, "window": 5, "softcap": 2.0}])
def test_stages_merged_by_their_weights_are_the_whole_row_softmax(attrs: dict) -> None:
    """Three stages of uneven width over 12 columns (9 visible), scores with lane
    partials: each stage normalised alone, the partial outputs ``p_st @ v`` merged, equal
    the whole-row softmax times v, including rows that see no column of a stage."""
    rng = np.random.default_rng(3)
    rows, n, lanes, dv, bounds = 6, 12, 4, 5, (0, 4, 8, 12)
    sp = rng.standard_normal((rows, n, lanes)).astype(np.float32)
    v = rng.standard_normal((n, dv)).astype(np.float32)
    common = {"scale": 0.7, "limit": 9, **attrs}
    whole = masked_softmax(_softmax_op("masked_softmax", (BufRef("pr", 0, (rows, n)),),
                                       (BufRef("sp", 0, (rows, n, lanes)),), **common), sp)
    full = BufRef("pr", 0, (rows * n + 2 * 3 * rows,))
    buf = np.zeros(full.shape, np.float32)
    for st in range(3):
        op = _softmax_op("softmax_part", (full,), (BufRef("sp", 0, (rows, n, lanes)), full),
                         **common, bounds="0,4,8,12", stage=st, rows=rows)
        buf = run(op, [sp, buf])
    probs = buf[: rows * n].reshape(rows, n)
    parts = np.stack([probs[:, lo:hi] @ v[lo:hi] for lo, hi in zip(bounds[:-1], bounds[1:],
                                                                   strict=True)])
    merge = _softmax_op("softmax_merge", (BufRef("y", 0, (rows * dv,)),),
                        (BufRef("pr", rows * n, (3, rows, 2)), BufRef("yp", 0, (3, rows * dv))))
    y = run(merge, [buf[rows * n:].reshape(3, rows, 2), parts.reshape(3, -1)])
    np.testing.assert_allclose(y.reshape(rows, dv), whole @ v, atol=1e-5)


@pytest.mark.parametrize("name, d, stages, extra", [
    ("aim-gddr6", 128, 2, {"seq_split": 2, "k_mode": "dot", "k_regs": 1}),
    ("aim-gddr6", 80, 2, {"seq_split": 1, "k_mode": "lane", "k_regs": 2}),
    ("hbm-pim", 64, 4, {"seq_split": 2, "k_mode": "lane", "k_regs": 2}),
    ("hbm-pim", 32, 2, {"seq_split": 4, "k_mode": "lane", "k_regs": 4, "k_qrows": 2}),
])
def test_staged_points_match_numpy_after_a_staged_prefill(name: str, d: int, stages: int,
                                                          extra: dict) -> None:
    """Stages whose boundaries fall inside K passes and between V groups' passes, with
    sequence splits whose streams meet a stage in different passes: decode after a
    prefill through the same staged layout matches numpy, each stage signals the host
    once and the host merges, and the latency respects the bound (``check_point``)."""
    hw = HW[name]
    w = workload(1, 1, 4, 2, d, 250, 256)
    space = family_of(w).space(w, hw)
    point = {**family_of(w).default(w, hw), **extra, "softmax_stages": stages}
    assert space.validate(point) == []
    pl = attention_layout_of(w.dims, 256, point, hw)
    assert pl.nst == stages
    kinds: list[str] = []
    prog = build(w, point, hw).program
    walk(prog.streams[-1].body, lambda ins, _n: kinds.append(getattr(ins, "kind", "")))
    assert kinds.count("softmax_part") == stages and kinds.count("softmax_merge") == 1
    check_point(hw, (1, 4, 2, d, 256), 1, 250, point, seed=11)


@pytest.mark.parametrize("name", sorted(HW))
def test_stages_hide_the_softmax_of_a_long_cache(name: str) -> None:
    """Llama 2's 32 heads of 1,024 positions: the default stages the softmax, and is
    faster than its own point with one stage (the host's softmax no longer sits between
    the two products), and still above the bound."""
    w = workload(1, 1, 32, 32, 128, 1024, 1024)
    fam = family_of(w)
    point = fam.default(w, hw := HW[name])
    assert point["softmax_stages"] > 1
    staged = simulate(build(w, point, hw).program, hw).latency_ns
    whole = simulate(build(w, {**point, "softmax_stages": 1}, hw).program, hw).latency_ns
    assert fam.bound(w, hw) <= staged < whole


def test_a_cache_too_short_for_the_stages_is_refused_naming_the_rule() -> None:
    """A cache whose K passes cannot stop inside the stages asked for: the space names
    the rule; a live count short of the second stage lowers to the whole-row softmax."""
    hw = HW["aim-gddr6"]
    w = workload(1, 1, 4, 2, 128, 250, 256)
    space = family_of(w).space(w, hw)
    point = {**family_of(w).default(w, hw), "seq_split": 2, "k_mode": "dot", "k_regs": 1}
    why = space.validate({**point, "softmax_stages": 4})
    assert why and "softmax_stages" in why[0]
    short = workload(1, 1, 4, 2, 128, 20, 256)
    pl = attention_layout_of(short.dims, 256, {**point, "softmax_stages": 2}, hw)
    assert pl.nst == 1
