"""Loop extrapolation agrees with full unrolling: GEMV programs, nested loops, refresh.

Run as a script for the speed figures: ``python tests/sim/test_timing_extrapolation.py``.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.hardware import Hardware
from sim.hwio import load_hardware
from sim.isa import Act, BufRef, ClrAcc, Ew, Mac, Pre, RdAcc, RdBank, WrGb, aff
from sim.program import Buffer, Loop, Program
from sim.timing import simulate
from sim.timing.channel import Channel

try:
    from .test_timing_kit import BUFFERS, add_op, easy_hw, host, pim, prog, ref
except ImportError:
    from test_timing_kit import BUFFERS, add_op, easy_hw, host, pim, prog, ref


def gemv_program(hw: Hardware, n: int, k: int) -> Program:
    """y[n] = W[n, k] x[k] on every channel: per k tile a WrGb, then all-bank Act, one
    Mac burst per output register, Pre; accumulators read out per block of outputs."""
    o, p = hw.org, hw.pim
    step, tile = p.banks_per_unit, hw.gb_elems
    tcols = tile // p.lanes
    per_row = hw.columns_per_row // tcols  # outputs of one k tile in one row
    rows = p.registers // per_row  # rows per k tile and output block
    blocks = n // (o.channels * hw.units_per_channel * p.registers)
    tiles = k // tile
    width = hw.units_per_channel * p.registers * p.register_lanes
    body = Loop("b", blocks, (
        ClrAcc(0, step, 0, p.registers),
        Loop("t", tiles, (
            WrGb(ref(tile), 0),
            Loop("h", rows, (
                Act(0, step, aff(0, b=tiles * rows, t=rows, h=1)),
                Loop("r", per_row, (
                    Mac(0, step, aff(0, r=tcols), tcols, 0, aff(0, h=per_row, r=1)),
                )),
                Pre(0, step),
            )),
        )),
        RdAcc(0, step, 0, p.registers, BufRef("y", aff(0, b=width, ch=blocks * width),
                                              (width,))),
    ))
    y = Buffer("y", "fp32", o.channels * blocks * width)
    return Program((pim(body, channels=tuple(range(o.channels))),), (BUFFERS[0], y))


def agree(p: Program, hw: Hardware, rel: float = 0.005, exact: bool = True) -> tuple:
    """Extrapolated vs unrolled: latency and energy within ``rel``, equal command counts;
    refreshes and row hits/misses equal when ``exact`` (no refresh crossing skipped),
    else within ``rel`` plus one refresh's worth."""
    fast, full = simulate(p, hw), simulate(p, hw, extrapolate=False)
    assert fast.latency_ns == pytest.approx(full.latency_ns, rel=rel)
    assert fast.commands == full.commands
    assert fast.energy_pj == pytest.approx(full.energy_pj, rel=rel)
    if exact:
        assert fast.refreshes == full.refreshes
        assert (fast.row_hits, fast.row_misses) == (full.row_hits, full.row_misses)
    else:
        ch = hw.org.channels
        assert fast.refreshes == pytest.approx(full.refreshes, rel=rel, abs=ch)
        hits = fast.row_hits + fast.row_misses
        assert hits == full.row_hits + full.row_misses
        assert fast.row_misses == pytest.approx(full.row_misses, rel=rel, abs=16 * ch)
    return fast, full


@pytest.mark.parametrize("preset", ["hbm-pim", "aim-gddr6"])
def test_gemv_extrapolated_matches_unrolled(preset):
    hw = load_hardware(preset)
    fast, _ = agree(gemv_program(hw, 4096, 4096), hw)
    assert fast.refreshes > 0
    assert fast.commands["mac"] * hw.org.column_bytes * hw.units_per_channel == 4096 * 4096 * 2


def test_nested_loops_with_frequent_refresh():
    hw = easy_hw(timing__trefi=400)
    inner = Loop("j", 13, (Act(0, 1, 0), Mac(0, 1, 0, 3, 0, 0), Ew(1, 0, "mul", 0, 1), Pre(0, 1)))
    body = Loop("i", 37, (WrGb(ref(128), 0), inner, RdAcc(0, 1, 0, 2, ref(256)),
                          Loop("k", 5, (Act(3, 0, 0), RdBank(3, 0, 2, ref(32)), Pre(3, 0)))))
    fast, _ = agree(prog(pim(body)), hw)
    assert fast.refreshes > 10


def test_global_buffer_address_moving_with_the_loop():
    hw = easy_hw()
    body = (Act(0, 1, 0), Loop("t", 40, (
        Loop("u", 8, (WrGb(ref(16), aff(0, u=16)), Mac(0, 1, 0, 1, aff(0, u=16), 0))),
    )), Pre(0, 1))
    agree(prog(pim(*body)), hw)


def test_host_loops_extrapolate():
    p = prog(host(Loop("i", 500, (add_op(64), add_op(128)))))
    res, _ = agree(p, easy_hw())
    assert res.commands["host"] == 1000


def test_extrapolation_skips_work(monkeypatch):
    calls = []
    orig = Channel.pim_col

    def counting(self, env, a):
        calls.append(1)
        orig(self, env, a)

    monkeypatch.setattr(Channel, "pim_col", counting)
    body = Loop("i", 500, (Act(0, 1, 0), Mac(0, 1, 0, 4, 0, 0), Pre(0, 1)))
    hw = easy_hw(timing__trefi=5000)
    fast = simulate(prog(pim(body)), hw)
    n_fast = len(calls)
    full = simulate(prog(pim(body)), hw, extrapolate=False)
    assert len(calls) - n_fast == 500
    assert n_fast < 100
    assert fast.latency_ns == full.latency_ns and fast.refreshes == full.refreshes > 0


BLOCKS = [
    (Act(0, 1, 0), Mac(0, 1, 0, 2, 0, 0), Pre(0, 1)),
    (Act(2, 0, 0), Mac(2, 0, 0, 5, 16, 1), Pre(2, 0)),
    (Act(5, 0, 0), RdBank(5, 0, 3, ref(48)), Pre(5, 0)),
    (WrGb(ref(32), 0),),
    (ClrAcc(0, 2, 0, 2), RdAcc(0, 2, 0, 1, ref(64))),
    (Act(4, 0, 0), Act(1, 0, 0), Act(6, 0, 0), Act(3, 0, 0), Pre(0, 1)),
]


@st.composite
def loop_programs(draw):
    def body(depth):
        nodes = []
        for _ in range(draw(st.integers(1, 3))):
            if depth < 2 and draw(st.booleans()):
                count = draw(st.integers(0, 40))
                nodes.append(Loop(f"v{depth}{len(nodes)}", count, body(depth + 1)))
            else:
                nodes.extend(BLOCKS[draw(st.integers(0, len(BLOCKS) - 1))])
        return tuple(nodes)

    return prog(pim(*body(0)))


@settings(max_examples=40, deadline=None)
@given(p=loop_programs(), trefi=st.sampled_from([300, 1000, 100000]))
def test_random_loop_nests_agree(p, trefi):
    # Recorded refresh crossings are replayed exactly, so even with frequent refresh the
    # extrapolated run equals the unrolled one.
    agree(p, easy_hw(timing__trefi=trefi), rel=1e-9)


if __name__ == "__main__":
    import time

    for preset, n, k in [("hbm-pim", 4096, 4096), ("hbm-pim", 16384, 4096),
                         ("aim-gddr6", 4096, 4096), ("aim-gddr6", 16384, 4096)]:
        hw = load_hardware(preset)
        prg = gemv_program(hw, n, k)
        for ex in (True, False):
            t0 = time.perf_counter()
            r = simulate(prg, hw, extrapolate=ex)
            dt = time.perf_counter() - t0
            per_ch = r.total_commands / hw.org.channels
            print(f"{preset} {n}x{k} extrapolate={ex}: {dt * 1e3:.1f} ms, "
                  f"latency {r.latency_ns / 1e3:.2f} us, {per_ch:.0f} commands/channel "
                  f"({per_ch / dt:.0f}/s), refreshes {r.refreshes}")
