"""Feature extraction: hand-checked counts on a tiny program, fixed length, determinism."""

from __future__ import annotations

import math

import numpy as np
import pytest

from cost_models import FEATURE_NAMES, Candidate, features, featurize, program_stats
from search_spaces import Workload
from search_spaces.gemv import gemv_space
from sim.bound import bound
from sim.hwio import load_hardware
from sim.isa import Act, BufRef, HostOp, Mac, Pre, RdAcc, Signal, Wait, WrGb, aff
from sim.program import Buffer, Loop, Program, Stream

HW = load_hardware("hbm-pim")  # 16 banks, 4 groups, 8 units of 2 banks, 16 lanes, fp16


def tiny() -> Program:
    """Two channels; 3 x (broadcast 16, activate all banks, 4 MAC columns, precharge)."""
    body = (
        Loop("i", 3, (WrGb(BufRef("x", aff(0, i=16), (16,)), aff(0)), Act(0, 1, aff(0, i=1)),
                      Mac(0, 1, aff(0), 4, aff(0), aff(0), "lane"), Pre(0, 1))),
        RdAcc(0, 1, aff(0), 1, BufRef("part", aff(0, ch=128), (128,))),
        Signal("t"),
    )
    host = (Wait(("t",)), HostOp("reduce_sum", (BufRef("y", aff(0), (16,)),),
                                 (BufRef("part", aff(0), (16, 16)),), (("axis", -1),)))
    bufs = (Buffer("x", "fp16", 48), Buffer("part", "fp32", 256), Buffer("y", "fp32", 16))
    return Program((Stream("pim", "pim", (0, 1), body), Stream("host", "host", (), host)), bufs)


def cand(program: Program, w: Workload | None = None) -> Candidate:
    w = w or Workload.make("gemv", m=1, n=16, k=48)
    space = gemv_space(w, HW)
    point = {"placement": "pim", "mode": "lane", "channels": 2, "k_split": 1, "gb_tile": 128,
             "registers": 4, "batch_rows": 1, "tile_outer": False, "double_buffer": False,
             "interleave": False, "row_prefetch": False}
    assert not space.validate(point)
    return Candidate(w, space, tuple(sorted(point.items())), HW, program)


def test_program_stats_hand_checked() -> None:
    st = program_stats(tiny(), HW)
    assert (st.channels, st.pim_streams) == (2, 1)
    assert st.commands == 3 * (1 + 1 + 4 + 1) + 1 + 1  # loop body, rdacc, signal
    assert st.columns == 12 and st.group_columns == 12 and st.unit_columns == 12
    assert st.bank_acts == 3 and st.channel_acts == 48 and st.bank_columns == 12
    assert (st.gb_writes, st.gb_bytes) == (3, 3 * 16 * 2)
    assert st.acc_bytes == 8 * 16 * 2  # 8 units x 1 register x 16 fp16 lanes
    assert st.lanes_issued == 2 * 12 * 8 * 16
    assert st.transfer_bytes == 2 * (96 + 256)
    assert (st.host_ops, st.host_flops, st.host_bytes) == (1, 256, 256 * 4 + 16 * 4)


def test_program_stats_bound_is_the_bound() -> None:
    from autosched.families.registry import build

    w = Workload.make("attention", attrs={"capacity": 64}, b=2, q=1, h=8, kvh=4, d=32, l=40)
    pt = {"kv_channels": 2, "seq_split": 2, "batch_split": 2, "scores": "pim", "k_mode": "lane",
          "k_regs": 2, "k_qrows": 2, "wsum": "pim", "v_qrows": 2, "v_groups": 1,
          "softmax_stages": 1}
    for prog in (tiny(), build(w, pt, HW).program):
        assert program_stats(prog, HW).bound == bound(prog, HW)


def test_feature_vector_hand_checked() -> None:
    f = dict(zip(FEATURE_NAMES, features(cand(tiny())), strict=True))
    lg = lambda x: math.log2(1 + x)  # noqa: E731
    assert f["log_bus_bytes"] == pytest.approx(lg(96 + 256))
    assert f["cols_per_act"] == 4.0
    assert f["lane_util"] == pytest.approx(16 * 48 / (2 * 12 * 8 * 16))
    assert f["log_useful_macs"] == pytest.approx(lg(768))
    assert f["channel_frac"] == pytest.approx(2 / 64)
    b = bound(tiny(), HW)
    assert f["log_bound_ns"] == pytest.approx(lg(b.ns))
    assert max(f[f"share_{r}"] for r in ("cmd_bus", "column_pipe", "bank_group", "pim_unit",
                                         "data_bus", "host")) == pytest.approx(1.0)
    assert f["log_act_ns"] == pytest.approx(lg(3 * (14 + 14) * 1.0))
    assert f["refresh_duty"] == pytest.approx(350 / 3900)
    assert f["family=gemv"] == 1.0 and f["family=attention"] == 0.0
    assert f["banks_per_unit"] == 2.0 and f["adder_tree"] == 0.0


def test_fixed_length_and_deterministic(gemv_data) -> None:
    cands = [c for cs, _ in gemv_data.values() for c in cs[:5]]
    x = featurize(cands)
    assert x.shape == (len(cands), len(FEATURE_NAMES))
    assert len(set(FEATURE_NAMES)) == len(FEATURE_NAMES)
    assert np.all(np.isfinite(x))
    # an equal candidate rebuilt from JSON, computed afresh, gives the same row
    c = cands[0]
    again = Candidate(c.workload, c.space, c.point, c.hw, Program.from_json(c.program.to_json()))
    assert "_features" not in again.__dict__
    assert np.array_equal(features(again), x[0])
    assert features(again) is features(again)  # computed once per candidate, read-only
    assert not features(again).flags.writeable
    assert featurize([]).shape == (0, len(FEATURE_NAMES))


def test_features_tell_hardware_and_schedules_apart(gemv_data) -> None:
    cs, _ = gemv_data[("hbm-pim", 1, 256, 512)]
    x = featurize(cs)
    assert len({row.tobytes() for row in x}) == len(cs)  # distinct points, distinct rows
    hw_cols = [FEATURE_NAMES.index(n) for n in ("trcd_mac_ns", "log_channel_gbps")]
    other = featurize(gemv_data[("aim-gddr6", 1, 256, 512)][0][:1])
    assert not np.array_equal(x[0, hw_cols], other[0, hw_cols])
