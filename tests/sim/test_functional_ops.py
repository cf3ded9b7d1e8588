"""Bank commands one by one, against hand-computed results.

Operands are small integers, so every product and sum is exact in fp16, bf16 and fp32
and results are compared for equality: any deviation is a semantic error, not rounding.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from sim.errors import ProgramError, SimError
from sim.functional import DeviceMemory, execute, round_to
from sim.hwio import load_hardware
from sim.isa import (
    Act,
    Af,
    BufRef,
    ClrAcc,
    Ew,
    Mac,
    Pre,
    RdAcc,
    RdBank,
    WrAcc,
    WrBank,
    WrGb,
    aff,
)
from sim.program import Buffer, Loop, Program, Stream

HBM, AIM = load_hardware("hbm-pim"), load_hardware("aim-gddr6")


def pim_program(body: tuple, buffers: tuple, channels: tuple[int, ...]) -> Program:
    return Program((Stream("pim0", "pim", channels, body),), buffers)


def random_rows(hw, mem: DeviceMemory, channels, rows, rng) -> dict:
    """Fill every bank of ``rows`` on ``channels`` with small integers; return the values."""
    vals = {}
    for c in channels:
        for r in rows:
            data = rng.integers(-3, 4, (hw.org.banks_per_channel, hw.row_elems)).astype(np.float32)
            b = np.arange(hw.org.banks_per_channel)
            mem.write_rows(np.full(b.size, c), b, np.full(b.size, r), data)
            vals[c, r] = data
    return vals


@pytest.mark.parametrize("hw,mode", [(HBM, "lane"), (HBM, "bcast"), (AIM, "lane"),
                                     (AIM, "bcast"), (AIM, "dot")])
def test_mac_per_channel_operands(hw, mode: str) -> None:
    """Row, column, gb offset, register and lane all vary with ch; channels not contiguous."""
    channels = (5, 2, 9)
    lanes, bpu, units = hw.pim.lanes, hw.pim.banks_per_unit, hw.units_per_channel
    ncols = 3
    gw = ncols if mode == "bcast" else ncols * lanes
    rng = np.random.default_rng(1)
    mem = DeviceMemory(hw)
    rows = random_rows(hw, mem, channels, range(3), rng)
    x = rng.integers(-3, 4, 3 * gw).astype(np.float32)
    body = (
        WrGb(BufRef("x", aff(0, ch=gw), (gw,)), aff(0, ch=2)),
        Act(0, bpu, aff(0, ch=1)),
        Mac(0, bpu, aff(1, ch=2), ncols, aff(0, ch=2), aff(1, ch=1), mode, aff(2, ch=3)),
        Mac(0, bpu, aff(1, ch=2), ncols, aff(0, ch=2), aff(1, ch=1), mode, aff(2, ch=3)),
        Pre(0, bpu),
        RdAcc(0, bpu, 0, 4, BufRef("out", aff(0, ch=units * 4 * lanes), (units * 4 * lanes,))),
    )
    size = units * 4 * lanes
    prog = pim_program(body, (Buffer("x", hw.pim.dtype, 3 * gw),
                              Buffer("out", "fp32", 3 * size)), channels)
    out = execute(prog, hw, mem, {"x": x})["out"].reshape(3, units, 4, lanes)
    for pos, c in enumerate(channels):
        gb = x[pos * gw:(pos + 1) * gw]
        expect = np.zeros((units, 4, lanes))
        for u in range(units):
            cols = rows[c, pos][u * bpu, (1 + 2 * pos) * lanes:(1 + 2 * pos + ncols) * lanes]
            v = cols.reshape(ncols, lanes)
            if mode == "lane":
                expect[u, 1 + pos] = 2 * (v * gb.reshape(ncols, lanes)).sum(0)
            elif mode == "bcast":
                expect[u, 1 + pos] = 2 * (v * gb[:, None]).sum(0)
            else:
                expect[u, 1 + pos, 2 + 3 * pos] = 2 * (v * gb.reshape(ncols, lanes)).sum()
        np.testing.assert_array_equal(out[pos], expect)


def test_elementwise_activation_and_write_back() -> None:
    hw = HBM
    mem = DeviceMemory(hw)
    rng = np.random.default_rng(2)
    rows = random_rows(hw, mem, (0, 1), (4,), rng)
    body = (
        Act(0, 2, 4),
        ClrAcc(0, 2, 0, 8),
        Ew(0, 2, "mov", 0, 3), Ew(0, 2, "add", 1, 3), Ew(0, 2, "mul", 2, 3),
        Af(0, 2, "relu", 3),
        WrAcc(0, 2, 10, 3),
        Pre(0, 2),
    )
    execute(pim_program(body, (), (0, 1)), hw, mem, {})
    for c in (0, 1):
        for b in range(0, 16, 2):
            col = rows[c, 4][b].reshape(32, 16)
            expect = np.maximum((col[0] + col[1]) * col[2], 0)
            np.testing.assert_array_equal(mem.read(c, b, 4, 160, 16), expect)
            untouched = rows[c, 4][b + 1, 160:176]  # odd banks were not targeted
            np.testing.assert_array_equal(mem.read(c, b + 1, 4, 160, 16), untouched)


def test_activations_round_to_accumulator_dtype() -> None:
    hw = AIM
    mem = DeviceMemory(hw)
    v = np.linspace(-3, 3, 16, dtype=np.float32)
    mem.write(0, 0, 0, 0, v)
    out = {}
    for fn in hw.pim.activation_functions:
        body = (Act(0, 0, 0), Ew(0, 0, "mov", 0, 0), Af(0, 0, fn, 0), Pre(0, 0),
                RdAcc(0, 0, 0, 1, BufRef("o", 0, (16,))))
        out[fn] = execute(pim_program(body, (Buffer("o", "fp32", 16),), (0,)), hw, mem, {})["o"]
    vb = round_to(v, "bf16").astype(np.float64)
    np.testing.assert_allclose(out["relu"], np.maximum(vb, 0))
    np.testing.assert_allclose(out["tanh"], np.tanh(vb), rtol=1e-6)
    np.testing.assert_allclose(out["sigmoid"], 1 / (1 + np.exp(-vb)), rtol=1e-6)
    np.testing.assert_allclose(out["gelu"], 0.5 * vb * (1 + np.tanh(
        np.sqrt(2 / np.pi) * (vb + 0.044715 * vb**3))), rtol=1e-5, atol=1e-7)


def test_wrbank_rdbank_round_trip_per_channel() -> None:
    hw = HBM
    mem = DeviceMemory(hw)
    data = np.arange(2 * 48, dtype=np.float32) + 0.25
    body = (
        Act(3, 0, 7),
        WrBank(3, 5, 3, BufRef("src", aff(0, ch=48), (48,))),
        RdBank(3, 4, 4, BufRef("dst", aff(0, ch=64), (64,))),
        Pre(3, 0),
    )
    prog = pim_program(body, (Buffer("src", "fp32", 96), Buffer("dst", "fp16", 128)), (10, 11))
    dst = execute(prog, hw, mem, {"src": data})["dst"].reshape(2, 64)
    for pos, c in enumerate((10, 11)):
        np.testing.assert_array_equal(mem.read(c, 3, 7, 80, 48), data[pos * 48:(pos + 1) * 48])
        np.testing.assert_array_equal(dst[pos, :16], 0)
        np.testing.assert_array_equal(dst[pos, 16:], data[pos * 48:(pos + 1) * 48])


def test_loop_over_rows_accumulates() -> None:
    hw = HBM
    mem = DeviceMemory(hw)
    rows = random_rows(hw, mem, (0,), range(5), np.random.default_rng(3))
    body = (
        WrGb(BufRef("x", 0, (16,)), 0),
        Loop("i", 5, (Act(0, 0, aff(0, i=1)), Mac(0, 0, aff(0, i=2), 1, 0, 0, "lane"), Pre(0, 0))),
        RdAcc(0, 0, 0, 1, BufRef("o", 0, (16,))),
    )
    x = np.arange(16, dtype=np.float32) % 3
    prog = pim_program(body, (Buffer("x", "fp16", 16), Buffer("o", "fp32", 16)), (0,))
    got = execute(prog, hw, mem, {"x": x})["o"]
    expect = sum(rows[0, i][0, 32 * i:32 * i + 16] * x for i in range(5))
    np.testing.assert_array_equal(got, expect)


def test_column_op_needs_open_row() -> None:
    body = (Mac(0, 2, 0, 1, 0, 0, "lane"),)
    with pytest.raises(SimError, match="pim0.*mac.*no open row.*act first"):
        execute(pim_program(body, (), (0,)), HBM, DeviceMemory(HBM), {})


def test_act_on_open_bank_is_an_error() -> None:
    body = (Loop("i", 2, (Act(0, 2, aff(0, i=1)),)),)
    with pytest.raises(SimError, match=r"act at i=1.*already open: pre first"):
        execute(pim_program(body, (), (0,)), HBM, DeviceMemory(HBM), {})


def test_inputs_and_memory_must_match_the_program() -> None:
    prog = pim_program((), (Buffer("x", "fp16", 4),), (0,))
    with pytest.raises(ProgramError, match="input 'y' binds no buffer"):
        execute(prog, HBM, DeviceMemory(HBM), {"y": np.zeros(4)})
    with pytest.raises(ProgramError, match="has 5 elements, buffer holds 4"):
        execute(prog, HBM, DeviceMemory(HBM), {"x": np.zeros(5)})
    with pytest.raises(ProgramError, match="memory was built for hardware 'aim-gddr6'"):
        execute(prog, HBM, DeviceMemory(AIM), {})


def test_outputs_cover_every_buffer_in_its_dtype() -> None:
    prog = pim_program((), (Buffer("a", "fp16", 2), Buffer("b", "bf16", 2)), (0,))
    out = execute(prog, HBM, DeviceMemory(HBM), {"a": [1 + 2.0**-12, 2], "b": [1 + 2.0**-9, 3]})
    np.testing.assert_array_equal(out["a"], [1, 2])
    np.testing.assert_array_equal(out["b"], [1, 3])
    assert out["a"].dtype == np.float32


def test_banks_with_different_open_rows() -> None:
    """Bank 2 re-opened on another row: one Mac and one WrAcc see per-bank rows."""
    hw = HBM
    mem = DeviceMemory(hw)
    rows = random_rows(hw, mem, (0,), (1, 3), np.random.default_rng(5))
    x = np.arange(16, dtype=np.float32) % 4
    body = (
        WrGb(BufRef("x", 0, (16,)), 0),
        Act(0, 2, 1), Pre(2, 0), Act(2, 0, 3),
        ClrAcc(0, 2, 0, 1),
        Mac(0, 2, 6, 1, 0, 0, "lane"),
        WrAcc(0, 2, 7, 0),
        Pre(0, 2),
        RdAcc(0, 2, 0, 1, BufRef("o", 0, (128,))),
    )
    prog = pim_program(body, (Buffer("x", "fp16", 16), Buffer("o", "fp32", 128)), (0,))
    out = execute(prog, hw, mem, {"x": x})["o"].reshape(8, 16)
    for u in range(8):
        r = 3 if u == 1 else 1
        expect = rows[0, r][2 * u, 96:112] * x
        np.testing.assert_array_equal(out[u], expect)
        np.testing.assert_array_equal(mem.read(0, 2 * u, r, 112, 16), expect)


def test_dot_mode_with_fp16_accumulator_rounds_per_column() -> None:
    """Column sums 1, 2^-12, 2^-12, ...: each fp16 step ties back to 1 (fp32 would not)."""
    hw = dataclasses.replace(HBM, pim=dataclasses.replace(HBM.pim, adder_tree=True))
    mem = DeviceMemory(hw)
    row = np.zeros(hw.row_elems, np.float32)
    row[::16] = 2.0**-12
    row[0] = 1.0
    mem.write(0, 0, 0, 0, row)
    body = (
        Loop("g", 4, (WrGb(BufRef("x", 0, (128,)), 0), Act(0, 0, 0),
                      Mac(0, 0, aff(0, g=8), 8, 0, 0, "dot", 5), Pre(0, 0))),
        RdAcc(0, 0, 0, 1, BufRef("o", 0, (16,))),
    )
    x = np.ones(128, np.float32)
    prog = pim_program(body, (Buffer("x", "fp16", 128), Buffer("o", "fp32", 16)), (0,))
    out = execute(prog, hw, mem, {"x": x})["o"]
    expect = np.zeros(16)
    expect[5] = 1.0
    np.testing.assert_array_equal(out, expect)


def test_execute_validates_first() -> None:
    prog = pim_program((Mac(0, 2, 0, 1, 0, 0, "dot"),), (), (0,))
    with pytest.raises(ProgramError, match="dot mode needs an adder tree"):
        execute(prog, HBM, DeviceMemory(HBM), {})


def test_permute_host_op_reorders_axes_and_moves_its_output() -> None:
    """``permute`` is numpy's transpose of the input as shaped; it costs its bytes moved
    (in and out) and no FLOPs."""
    from sim.host_ops import cost
    from sim.isa import HostOp

    op = HostOp("permute", (BufRef("y", aff(0), (2, 3, 4, 5)),),
                (BufRef("x", aff(0), (2, 4, 3, 5)),), (("axes", "0,2,1,3"),))
    prog = Program((Stream("host", "host", (), (op,)),),
                   (Buffer("x", "fp32", 120), Buffer("y", "fp32", 120)))
    x = np.arange(120, dtype=np.float32)
    out = execute(prog, HBM, DeviceMemory(HBM), {"x": x})
    want = x.reshape(2, 4, 3, 5).transpose(0, 2, 1, 3).reshape(-1)
    np.testing.assert_array_equal(out["y"], want)
    assert cost(op, {"x": "fp32", "y": "fp32"}) == (0.0, 120 * 4 * 2.0)
