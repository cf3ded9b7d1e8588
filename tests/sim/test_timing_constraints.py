"""Each DRAM timing constraint alone, on tiny programs whose latency is worked out by hand.

Device: tests/sim/test_timing_kit.py (tck 1 ns). Shorthand below: a Mac column issued at
t finishes at t + burst (2) + pipeline (15) = t + 17.
"""

from __future__ import annotations

import pytest

from sim.isa import Act, Af, ClrAcc, Mac, Pre, RdAcc, RdBank, WrAcc, WrBank, WrGb
from sim.timing import simulate

try:
    from .test_timing_kit import easy_hw, pim, prog, ref
except ImportError:
    from test_timing_kit import easy_hw, pim, prog, ref


def lat(*body, **hw) -> float:
    return simulate(prog(pim(*body)), easy_hw(**hw)).latency_ns


def test_trcd_and_cl_read():
    # Act @0, RdBank @tRCD=10, data 15..19 (CL 5, 32 B at 8 GB/s = 4).
    assert lat(Act(0, 0, 0), RdBank(0, 0, 1, ref(16))) == pytest.approx(19)
    assert lat(Act(0, 0, 0), RdBank(0, 0, 1, ref(16)), timing__cl=9) == pytest.approx(23)


def test_trcd_mac():
    # Act @0, Mac @tRCD_MAC=12, done 12 + 17.
    assert lat(Act(0, 0, 0), Mac(0, 0, 0, 1, 0, 0)) == pytest.approx(29)
    assert lat(Act(0, 0, 0), Mac(0, 0, 0, 1, 0, 0), timing__trcd_mac=20) == pytest.approx(37)


def test_tras_and_trp():
    assert lat(Act(0, 0, 0), Pre(0, 0)) == pytest.approx(21)  # Pre @tRAS=20
    assert lat(Act(0, 0, 0), Pre(0, 0), Act(0, 0, 1)) == pytest.approx(29)  # Act @20+tRP


def test_tccd_short_vs_long():
    # All-bank Act @0; first Mac @12; other group +tCCD_S=2, same group +tCCD_L=4.
    other = lat(Act(0, 1, 0), Mac(0, 0, 0, 1, 0, 0), Mac(4, 0, 0, 1, 0, 0))
    same = lat(Act(0, 1, 0), Mac(0, 0, 0, 1, 0, 0), Mac(1, 0, 0, 1, 0, 0))
    assert other == pytest.approx(14 + 17)
    assert same == pytest.approx(16 + 17)


def test_pim_unit_rate_spaces_a_burst():
    # 4 columns on one unit, every 5 cycles (200 MHz unit, > tCCD_L): last @12+15.
    assert lat(Act(0, 0, 0), Mac(0, 0, 0, 4, 0, 0)) == pytest.approx(27 + 17)
    # A faster unit falls back to tCCD_L = 4: last @12+12.
    assert lat(Act(0, 0, 0), Mac(0, 0, 0, 4, 0, 0), pim__clock_mhz=1000.0) == pytest.approx(
        24 + 2 + 3
    )


def test_trrd_short_vs_long():
    assert lat(Act(0, 0, 0), Act(4, 0, 0)) == pytest.approx(4)  # tRRD_S = 3
    assert lat(Act(0, 0, 0), Act(1, 0, 0)) == pytest.approx(6)  # tRRD_L = 5


def test_tfaw_single_and_multi_bank():
    # Acts 0@0, 4@3, 1@6, 5@9; the fifth waits for the first + tFAW = 30.
    acts = [Act(b, 0, 0) for b in (0, 4, 1, 5, 2)]
    assert lat(*acts) == pytest.approx(31)
    assert lat(*acts[:4]) == pytest.approx(10)
    # A multi-bank Act counts as four activations.
    assert lat(Act(0, 4, 0), Act(1, 0, 0)) == pytest.approx(31)


def test_twr():
    # WrBank @tRCD_WR=6; Pre >= 6 + CWL 3 + burst 2 + tWR 20 = 31 (> tRAS).
    body = (Act(0, 0, 0), WrBank(0, 0, 1, ref(16)), Pre(0, 0))
    assert lat(*body, timing__twr=20) == pytest.approx(32)
    assert lat(*body) == pytest.approx(21)  # tWR 7: tRAS decides


def test_trtp():
    body = (Act(0, 0, 0), RdBank(0, 0, 1, ref(16)), Pre(0, 0))
    assert lat(*body, timing__trtp=15) == pytest.approx(26)  # Pre @10+15
    assert lat(*body) == pytest.approx(21)  # tRTP 3: tRAS decides


def test_data_bus_serialises_transfers():
    # 16-bit bus at 2 Gbps: 4 GB/s, 8 cycles per 32 B. RdBank @10, data 15..23;
    # WrGb @11 would start at 14 but waits for the bus: 23..31.
    body = (Act(0, 0, 0), RdBank(0, 0, 1, ref(16)), WrGb(ref(16), 0))
    assert lat(*body, bus__width_bits=16) == pytest.approx(31)
    # Four columns every tCCD_L = 4 but 8 cycles each on the bus: 15 + 4 x 8.
    assert lat(Act(0, 0, 0), RdBank(0, 0, 4, ref(64)), bus__width_bits=16) == pytest.approx(47)


def test_refresh_interval_and_cycle():
    clr = [ClrAcc(0, 0, 0)] * 101
    # 100 slots at 0..99; the 101st meets the due cycle 100: refresh 100..150, issue @150.
    res = simulate(prog(pim(*clr)), easy_hw(timing__trefi=100))
    assert res.refreshes == 1
    assert res.latency_ns == pytest.approx(151)
    assert simulate(prog(pim(*clr[:100])), easy_hw(timing__trefi=100)).refreshes == 0


def test_refresh_closes_and_reopens_rows():
    # Act @0, 99 slots to 99; at 100: Pre @100, REF @108 (tRP), re-Act @158, ClrAcc @159.
    body = (Act(0, 0, 0), *[ClrAcc(0, 0, 0)] * 100)
    res = simulate(prog(pim(*body)), easy_hw(timing__trefi=100))
    assert res.latency_ns == pytest.approx(160)
    # The row is open again: a read after it is a row miss at re-Act + tRCD.
    res = simulate(prog(pim(*body, RdBank(0, 0, 1, ref(16)))), easy_hw(timing__trefi=100))
    assert res.latency_ns == pytest.approx(168 + 5 + 4)
    assert (res.row_misses, res.row_hits) == (1, 0)
    assert res.energy_breakdown["activate"] == pytest.approx(2 * 100.0)


def test_global_buffer_readiness():
    # WrGb 112 elements @1: bus 4..32 (slots 0-6); WrGb 16 @2: bus 32..36 (slot 7).
    fill = (Act(0, 0, 0), WrGb(ref(112), 0), WrGb(ref(16), 112))
    assert lat(*fill, Mac(0, 0, 0, 1, 0, 0)) == pytest.approx(32 + 17)
    assert lat(*fill, Mac(0, 0, 0, 1, 112, 0)) == pytest.approx(36 + 17)
    assert lat(Act(0, 0, 0), Mac(0, 0, 0, 1, 0, 0)) == pytest.approx(29)  # nothing to wait


def test_rdacc_waits_for_mac_pipeline():
    # Mac @12 done @29; RdAcc @29, data @34 + 64 B / 8 GB/s = 42.
    assert lat(Act(0, 0, 0), Mac(0, 0, 0, 1, 0, 0), RdAcc(0, 0, 0, 1, ref(16))) == 42
    # Two units, two registers each: 4 x 64 B = 32 cycles.
    body = (Act(0, 4, 0), Mac(0, 4, 0, 1, 0, 0), RdAcc(0, 4, 0, 2, ref(64)))
    assert lat(*body) == pytest.approx(29 + 5 + 32)


def test_wracc_waits_for_pipeline_and_sets_write_recovery():
    # Mac @12 done @29; WrAcc @29; Pre >= 29 + CWL 3 + burst 2 + tWR 7 = 41.
    body = (Act(0, 0, 0), Mac(0, 0, 0, 1, 0, 0), WrAcc(0, 0, 1, 0), Pre(0, 0))
    assert lat(*body) == pytest.approx(42)


def test_activation_function_occupies_the_pipeline():
    # Af @0 on two units: result @15 (3 unit cycles at 200 MHz); 2 x 16 lane ops.
    res = simulate(prog(pim(Af(0, 4, "relu", 0))), easy_hw())
    assert res.latency_ns == pytest.approx(15)
    assert res.energy_breakdown["mac"] == pytest.approx(32 * 1.0)
    assert lat(Af(0, 0, "relu", 0), RdAcc(0, 0, 0, 1, ref(16))) == pytest.approx(15 + 5 + 8)
