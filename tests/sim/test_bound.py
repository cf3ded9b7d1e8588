"""The analytical bound: hand-checked resources, and never above the simulated latency."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.bound import bound
from sim.hwio import load_hardware
from sim.isa import (
    Act,
    BufRef,
    ClrAcc,
    Ew,
    HostOp,
    Mac,
    Pre,
    RdAcc,
    RdBank,
    Signal,
    Wait,
    WrBank,
    WrGb,
    aff,
)
from sim.kernels import gemv
from sim.program import Buffer, Loop, Program, Stream
from sim.timing import simulate

BUFS = (Buffer("x", "fp32", 8192), Buffer("y", "fp32", 8192), Buffer("z", "fp32", 8192))


def ref(n: int, buf: str = "x") -> BufRef:
    return BufRef(buf, 0, (n,))


def test_bound_counts_each_resource_by_hand() -> None:
    hw = load_hardware("aim-gddr6")  # tck 0.5 ns, tCCD_S = tCCD_L = 2, column every 1 ns
    body = (WrGb(ref(1024), 0), Loop("r", 10, (Act(0, 1, 0), Mac(0, 1, 0, 64, 0, 0, "dot"),
                                               Pre(0, 1))))
    b = bound(Program((Stream("p", "pim", range(2), body),), BUFS), hw)
    # 640 column commands: (640 - 1) x tCCD_S x 0.5 ns; every bank group sees all of them
    assert b.resources["p:column_pipe"] == pytest.approx(639 * 2 * 0.5)
    assert b.resources["p:bank_group"] == pytest.approx(639 * 2 * 0.5)
    # one unit per bank: 640 columns of 16 lanes at 1 GHz
    assert b.resources["p:pim_unit"] == pytest.approx(639 * 1.0)
    # 2 KB over a 32 GB/s channel
    assert b.resources["p:data_bus"] == pytest.approx(2048 / 32)
    # 1 WrGb + 10 x (Act + 64 Mac + Pre) commands, one cycle apart
    assert b.resources["p:cmd_bus"] == pytest.approx((10 * 66) * 0.5)
    assert b.ns == pytest.approx(639.0)


@pytest.mark.parametrize("hw_name", ["hbm-pim", "aim-gddr6"])
def test_library_gemv_above_bound(hw_name: str) -> None:
    hw = load_hardware(hw_name)
    p = gemv(hw, 4096, 4096).program
    assert simulate(p, hw).latency_ns >= bound(p, hw).ns


def _out(n: int, buf: str = "x") -> BufRef:
    """A read-out window of ``n`` elements, one per channel (1024 apart)."""
    return BufRef(buf, aff(0, ch=1024), (n,))


def _blocks(bpu: int) -> list[tuple]:
    """Well-formed command groups (each leaves every bank closed)."""
    units = 16 // bpu
    return [
        (Act(0, 1, 0), Mac(0, bpu, 0, 4, 0, 0, "bcast"), Pre(0, 1)),
        (Act(2, 0, 3), Mac(2, 0, 1, 7, 16, 1, "bcast"), Pre(2, 0)),
        (Act(5, 0, 1), RdBank(5, 0, 3, _out(48)), Pre(5, 0)),
        (Act(6, 0, 2), WrBank(6, 2, 2, ref(32)), Pre(6, 0)),
        (WrGb(ref(64), 0),),
        (ClrAcc(0, bpu, 0, 2), RdAcc(0, bpu, 0, 1, _out(16 * units, "y"))),
        (Act(4, 0, 0), Act(1, 0, 0), Act(7, 0, 0), Act(3, 0, 0), Pre(0, 1)),
        (Act(0, bpu, 9), Ew(0, bpu, "mov", 0, 1), Ew(0, bpu, "add", 1, 1), Pre(0, bpu)),
    ]


@st.composite
def programs(draw, bpu: int):
    blocks = _blocks(bpu)

    def body(depth: int) -> tuple:
        nodes: list = []
        for _ in range(draw(st.integers(1, 3))):
            if depth < 2 and draw(st.booleans()):
                inner = body(depth + 1)
                nodes.append(Loop(f"v{depth}{len(nodes)}", draw(st.integers(0, 30)), inner))
            else:
                nodes.extend(blocks[draw(st.integers(0, len(blocks) - 1))])
        return tuple(nodes)

    n_ch = draw(st.integers(1, 4))
    streams = [Stream("a", "pim", range(n_ch), (*body(0), Signal("a_done")))]
    sizes = draw(st.lists(st.integers(1, 4096), max_size=3))
    host_ops = [HostOp("scale", (ref(n, "z"),), (ref(n),)) for n in sizes]
    if draw(st.booleans()):
        streams.append(Stream("b", "pim", range(n_ch, n_ch + 2), body(0)))
    streams.append(Stream("h", "host", (), (*host_ops, Wait(("a_done",)), *host_ops)))
    return Program(tuple(streams), BUFS)


@settings(max_examples=60, deadline=None)
@given(data=st.data(), hw_name=st.sampled_from(["hbm-pim", "aim-gddr6"]))
def test_latency_never_beats_the_bound(data, hw_name: str) -> None:
    hw = load_hardware(hw_name)
    p = data.draw(programs(hw.pim.banks_per_unit))
    sim_ns = simulate(p, hw).latency_ns
    assert sim_ns >= bound(p, hw).ns * (1 - 1e-12)
