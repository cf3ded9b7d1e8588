"""Streams, host roofline, Signal/Wait, deadlock, operand errors, energy and scaling."""

from __future__ import annotations

import pytest

from sim.errors import ProgramError, SimError
from sim.isa import Act, BufRef, ClrAcc, Ew, Mac, Pre, RdAcc, Signal, Wait, WrGb, aff
from sim.program import Program
from sim.timing import SimResult, simulate

try:
    from .test_timing_kit import add_op, easy_hw, host, pim, prog, ref
except ImportError:
    from test_timing_kit import add_op, easy_hw, host, pim, prog, ref


def test_host_roofline_bandwidth_and_compute_bound():
    # 1024 adds: 1024 FLOPs at 1 GFLOP/s = 1024 ns; 12288 B at 10 GB/s = 1228.8 ns.
    hw = easy_hw()
    assert simulate(prog(host(add_op(1024))), hw).latency_ns == pytest.approx(200 + 1228.8)
    fast = easy_hw(host__bandwidth_gbps=100.0)
    assert simulate(prog(host(add_op(1024))), fast).latency_ns == pytest.approx(200 + 1024)
    res = simulate(prog(host(add_op(1024), add_op(1024))), hw)
    assert res.latency_ns == pytest.approx(2 * 1428.8)
    assert res.utilisation["host"] == pytest.approx(1.0)
    assert res.energy_breakdown["host"] == pytest.approx(2 * (1024 * 0.25 + 12288 * 0.5))


def test_signal_wait_across_streams():
    # Host op ends at 1428.8 ns; the PIM Act waits to cycle 1429, the PIM stream ends 1430.
    p = prog(host(add_op(1024), Signal("x")), pim(Wait(("x",)), Act(0, 0, 0)))
    res = simulate(p, easy_hw())
    assert res.stream_end_ns == {"host": pytest.approx(1428.8), "pim": pytest.approx(1430)}
    # Back again: the host waits for the Mac pipeline (Act @1429, Mac @1441, done @1458).
    p = prog(host(add_op(1024), Signal("x"), Wait(("y",)), add_op(1024)),
             pim(Wait(("x",)), Act(0, 0, 0), Mac(0, 0, 0, 1, 0, 0), Signal("y")))
    assert simulate(p, easy_hw()).latency_ns == pytest.approx(1458 + 1428.8)


def test_each_waiter_has_its_own_cursor_per_token():
    # Two signals of "x"; the second Wait of the PIM stream takes the second signal.
    p = prog(host(add_op(1024), Signal("x"), add_op(1024), Signal("x")),
             pim(Wait(("x",)), ClrAcc(0, 0, 0), Wait(("x",)), ClrAcc(0, 0, 0)),
             pim(Wait(("x",)), ClrAcc(0, 0, 0), channels=(1,), name="other"))
    res = simulate(p, easy_hw())
    assert res.stream_end_ns["pim"] == pytest.approx(2859)  # ceil(2857.6) + 1
    assert res.stream_end_ns["other"] == pytest.approx(1430)


def test_signal_in_a_loop_is_consumed_in_order():
    from sim.program import Loop

    p = prog(host(Loop("i", 3, (add_op(1024), Signal("x")))),
             pim(Loop("j", 3, (Wait(("x",)), ClrAcc(0, 0, 0)))))
    assert simulate(p, easy_hw()).stream_end_ns["pim"] == pytest.approx(4288)  # 3 x 1428.8


def test_deadlock_names_stream_and_token():
    # a wait on a token nobody signals is caught before timing, by the validator
    with pytest.raises(ProgramError, match=r"pim: wait on token 'never'"):
        simulate(prog(pim(Wait(("never",)), ClrAcc(0, 0, 0))), easy_hw())
    cyc = prog(host(Wait(("a",)), Signal("b")), pim(Wait(("b",)), Signal("a")))
    with pytest.raises(SimError, match="deadlock"):
        simulate(cyc, easy_hw())


def test_token_with_two_producers_is_rejected():
    p = prog(host(Signal("x")), pim(Signal("x")))
    with pytest.raises(ProgramError, match="'x'"):
        simulate(p, easy_hw())


@pytest.mark.parametrize("body, exc, pattern", [
    ((Act(0, 0, 0), Act(0, 0, 1)), SimError, "open bank"),
    ((Mac(0, 0, 0, 1, 0, 0),), SimError, "no open row"),
    ((Act(0, 0, 0), Pre(0, 0), Ew(0, 0, "add", 0, 0)), SimError, "no open row"),
    ((Act(8, 0, 0),), ProgramError, "bank 8"),
    ((ClrAcc(0, 0, 3, 2),), ProgramError, "register"),
    ((Act(0, 0, 0), Mac(0, 0, 0, 1, 0, 4)), ProgramError, "register"),
    ((Act(0, 0, 0), Mac(0, 0, 30, 4, 0, 0)), ProgramError, "column"),
    ((WrGb(ref(32), 120),), ProgramError, "global buffer"),
    ((Act(0, 0, 0), Mac(0, 0, 0, 1, 0, 0, mode="nope")), ProgramError, "mode"),
])
def test_errors(body, exc, pattern):
    with pytest.raises(exc, match=pattern):
        simulate(prog(pim(*body)), easy_hw())


def test_two_banks_on_one_unit_is_rejected():
    hw = easy_hw(pim__banks_per_unit=2)
    for ins in (Mac(0, 1, 0, 1, 0, 0), ClrAcc(0, 1, 0), RdAcc(0, 1, 0, 1, ref(128))):
        with pytest.raises(ProgramError, match="share a unit"):
            simulate(prog(pim(Act(0, 1, 0), ins)), hw)
    assert simulate(prog(pim(Act(0, 1, 0), Mac(0, 2, 0, 1, 0, 0))), hw).latency_ns > 0


def test_counts_energy_and_hits():
    # All 8 banks: one Act, a 3-column Mac burst, Pre.
    res = simulate(prog(pim(Act(0, 1, 0), Mac(0, 1, 0, 3, 0, 0), Pre(0, 1))), easy_hw())
    assert res.commands == {"act": 1, "mac": 3, "pre": 1}
    assert res.total_commands == 5
    assert (res.row_misses, res.row_hits) == (8, 16)
    e = res.energy_breakdown
    assert e["activate"] == pytest.approx(8 * 100.0)
    assert e["column"] == pytest.approx(24 * 10.0)
    assert e["mac"] == pytest.approx(24 * 16 * 1.0)
    assert e["static"] == pytest.approx(res.latency_ns * 1.0)
    assert res.energy_pj == pytest.approx(sum(e.values()))
    assert set(e) >= {"activate", "column", "mac", "gb_write", "offchip", "refresh", "host",
                      "static"}
    # Mac columns @12, 17, 22 (unit rate 5); Pre at max(tRAS 20, 22 + tRTP 3) = 25.
    assert res.latency_ns == pytest.approx(22 + 17)
    wr = simulate(prog(pim(WrGb(ref(64), 0))), easy_hw()).energy_breakdown
    assert wr["gb_write"] == pytest.approx(128 * 2.0)
    assert wr["offchip"] == pytest.approx(128 * 8 * 0.5)


def test_channels_scale_counts_not_latency():
    out = BufRef("y", aff(0, ch=128), (128,))
    body = (WrGb(ref(64), 0), Act(0, 1, 0), Mac(0, 1, 0, 4, 0, 0), RdAcc(0, 1, 0, 1, out))
    one = simulate(prog(pim(*body)), easy_hw())
    four = simulate(prog(pim(*body, channels=(0, 1, 2, 3))), easy_hw())
    assert four.latency_ns == pytest.approx(one.latency_ns)
    assert four.commands == {k: 4 * v for k, v in one.commands.items()}
    assert four.row_misses == 4 * one.row_misses
    for k in ("activate", "column", "mac", "gb_write", "offchip"):
        assert four.energy_breakdown[k] == pytest.approx(4 * one.energy_breakdown[k])
    assert four.utilisation == pytest.approx(one.utilisation)


def test_result_is_json_ready_and_streams_are_checked():
    import json

    res = simulate(prog(pim(Act(0, 0, 0))), easy_hw())
    assert isinstance(res, SimResult)
    assert json.loads(json.dumps(res.to_dict()))["latency_ns"] == pytest.approx(1)
    with pytest.raises(ProgramError, match="channel 0"):
        simulate(prog(pim(), pim(name="b")), easy_hw())
    with pytest.raises(ProgramError, match=r"channel 9 outside \[0, 4\)"):
        simulate(prog(pim(channels=(9,))), easy_hw())
    with pytest.raises(ProgramError, match="host stream"):
        simulate(Program((host(Act(0, 0, 0)),), ()), easy_hw())


def test_invalid_program_is_never_timed():
    """A step reaching past the last bank would address one bank; the simulator refuses it
    (the validator is its first step) instead of timing it."""
    with pytest.raises(ProgramError, match="step 8 outside"):
        simulate(prog(pim(ClrAcc(0, 8, 0))), easy_hw())
