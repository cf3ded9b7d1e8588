"""The ablation decomposition of a program's latency: the parts add up, and each names
what the schedule changes (the pipelined row walk hides activations; a one-bank unit
cannot; a program longer than tREFI pays refresh)."""

from __future__ import annotations

import pytest

from sim.hwio import load_hardware
from sim.kernels import GemvOpts, gemv
from sim.timing.decompose import PARTS, decompose

HBM, AIM = load_hardware("hbm-pim"), load_hardware("aim-gddr6")


@pytest.mark.parametrize("hw", [HBM, AIM], ids=["hbm-pim", "aim-gddr6"])
def test_parts_add_up_to_the_latency(hw):
    d = decompose(gemv(hw, 1024, 1024).program, hw)
    assert set(d) == {*PARTS, "latency"}
    assert all(d[p] >= 0 for p in PARTS)
    assert sum(d[p] for p in PARTS) == pytest.approx(d["latency"])
    assert d["host"] > 0  # the finishing host op


def test_pipelined_row_walk_hides_the_activations_the_plain_one_shows():
    plain = GemvOpts(mode="bcast", k_split=2, gb_tile=64, interleave=True, double_buffer=True)
    piped = GemvOpts(mode="bcast", k_split=2, gb_tile=64, interleave=True, double_buffer=True,
                     row_prefetch=True)
    a = decompose(gemv(HBM, 4096, 4096, 1, plain).program, HBM)
    b = decompose(gemv(HBM, 4096, 4096, 1, piped).program, HBM)
    assert b["activations"] < 0.2 * a["activations"]
    assert b["latency"] < a["latency"]
    assert b["refresh"] > 0  # 9 us of bank work spans two refresh intervals


def test_a_one_bank_unit_pays_its_activations():
    d = decompose(gemv(AIM, 4096, 4096).program, AIM)
    assert d["activations"] > 0.2 * d["latency"]
