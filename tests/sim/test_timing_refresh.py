"""Speed paths: refresh crossings skipped by phase, equal SPMD streams simulated once.

Both must agree with the fully unrolled, stream-by-stream simulation: exactly where a
crossing's phase was seen before or streams are folded, within 0.5 % where the nearest
phase's penalty is charged.
"""

from __future__ import annotations

import pytest

from sim.bound import bound
from sim.hardware import Hardware
from sim.hwio import load_hardware
from sim.isa import Act, BufRef, Mac, Pre, RdAcc, Signal, Wait, WrGb, aff
from sim.program import Buffer, Loop, Program
from sim.timing import simulate
from sim.timing.channel import Channel

try:
    from .test_timing_kit import BUFFERS, add_op, easy_hw, host, pim, prog, ref
except ImportError:
    from test_timing_kit import BUFFERS, add_op, easy_hw, host, pim, prog, ref


@pytest.fixture
def mac_calls(monkeypatch) -> list[int]:
    """Counts simulated Mac commands (each burst once) by appending to the list."""
    calls: list[int] = []
    orig = Channel.pim_col

    def counting(self, env, a):
        calls.append(1)
        orig(self, env, a)

    monkeypatch.setattr(Channel, "pim_col", counting)
    return calls


def long_gemv(hw: Hardware, rows: int) -> Program:
    """One global-buffer tile against ``rows`` rows: all-bank Act, a Mac burst, Pre."""
    step, tcols = hw.pim.banks_per_unit, hw.gb_elems // hw.pim.lanes
    units = hw.units_per_channel
    body = (WrGb(ref(hw.gb_elems), 0),
            Loop("i", rows, (Act(0, step, aff(0, i=1)), Mac(0, step, 0, tcols, 0, 0),
                             Pre(0, step))),
            RdAcc(0, step, 0, 1, BufRef("y", aff(0, ch=16 * units), (16 * units,))))
    return Program((pim(*body, channels=tuple(range(hw.org.channels))),),
                   (*BUFFERS[:1], Buffer("y", "fp32", 16 * units * hw.org.channels)))


@pytest.mark.parametrize("preset", ["hbm-pim", "aim-gddr6"])
def test_long_gemv_across_many_refreshes(preset, mac_calls):
    hw = load_hardware(preset)
    p = long_gemv(hw, 4000)
    fast = simulate(p, hw)
    simulated = len(mac_calls)
    full = simulate(p, hw, extrapolate=False)
    assert full.refreshes >= 50 * hw.org.channels
    assert fast.commands == full.commands and fast.commands["mac"] > 0
    assert fast.latency_ns == pytest.approx(full.latency_ns, rel=1e-12)
    assert fast.energy_pj == pytest.approx(full.energy_pj, rel=1e-12)
    assert fast.refreshes == full.refreshes
    assert fast.latency_ns >= bound(p, hw).ns
    assert len(mac_calls) - simulated == 4000  # unrolled: every Mac
    assert simulated * 50 < 4000  # extrapolated: far fewer than it counts


def test_recorded_phases_replay_exactly(mac_calls):
    # Only recorded crossings are skipped: the result is exact and still much cheaper
    # than unrolling.
    hw = easy_hw(timing__trefi=700)
    body = Loop("i", 3000, (Act(0, 1, 0), Mac(0, 1, 0, 4, 0, 0), Pre(0, 1)))
    fast = simulate(prog(pim(body)), hw)
    simulated = len(mac_calls)
    full = simulate(prog(pim(body)), hw, extrapolate=False)
    assert full.refreshes > 100
    assert (fast.latency_ns, fast.energy_pj, fast.refreshes) == (
        full.latency_ns, full.energy_pj, full.refreshes)
    assert (fast.row_hits, fast.row_misses, fast.commands) == (
        full.row_hits, full.row_misses, full.commands)
    assert simulated * 5 < 3000


def test_equal_loops_share_what_they_learnt(mac_calls):
    # The second copy of a loop starts periodic: it skips from its first iteration on.
    hw = easy_hw(timing__trefi=100000)
    loop = Loop("i", 200, (Act(0, 1, 0), Mac(0, 1, 0, 4, 0, 0), Pre(0, 1)))
    simulate(prog(pim(loop)), hw)
    once = len(mac_calls)
    fast = simulate(prog(pim(loop, loop)), hw)
    assert len(mac_calls) - once < 2 * once
    full = simulate(prog(pim(loop, loop)), hw, extrapolate=False)
    assert fast.latency_ns == full.latency_ns and fast.commands == full.commands


def spmd(names: tuple[str, ...], rows: int) -> Program:
    """A host op, then each PIM stream runs the same loop and signals its own token."""
    body = Loop("i", rows, (Act(0, 1, 0), Mac(0, 1, 0, 4, 0, 0), Pre(0, 1)))
    pims = [pim(Wait(("go",)), body, RdAcc(0, 1, 0, 1, ref(128)), Signal(f"done.{n}"),
                name=n, channels=(k,)) for k, n in enumerate(names)]
    h = host(add_op(64), Signal("go"), Wait(tuple(f"done.{n}" for n in names)), add_op(64))
    return prog(h, *pims)


def test_equal_streams_are_simulated_once(mac_calls):
    hw = easy_hw(timing__trefi=500)
    one = simulate(spmd(("a",), 300), hw, extrapolate=False)
    single = len(mac_calls)
    four = simulate(spmd(("a", "b", "c", "d"), 300), hw, extrapolate=False)
    assert len(mac_calls) - single == single  # one representative for four streams
    assert four.latency_ns == one.latency_ns
    assert four.stream_end_ns == {"host": one.stream_end_ns["host"],
                                  **{n: one.stream_end_ns["a"] for n in "abcd"}}
    assert four.commands["mac"] == 4 * one.commands["mac"]
    assert four.refreshes == 4 * one.refreshes
    assert four.energy_breakdown["activate"] == pytest.approx(
        4 * one.energy_breakdown["activate"])


def test_streams_differing_in_timing_are_not_folded():
    hw = easy_hw()
    p = spmd(("a", "b"), 10)
    slower = pim(Wait(("go",)), Act(0, 1, 0), Mac(0, 1, 0, 8, 0, 0), Pre(0, 1),
                 Signal("done.b"), name="b", channels=(1,))
    res = simulate(Program((*p.streams[:2], slower), BUFFERS), hw)
    assert res.stream_end_ns["a"] != res.stream_end_ns["b"]
    assert res.commands["mac"] == 10 * 4 + 8
