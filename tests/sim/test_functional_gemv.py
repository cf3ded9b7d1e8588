"""A hand-built GEMV (weights in rows, x broadcast, lane MACs, host reduction) on both presets.

Error bounds, with u the unit roundoff of a format (fp16 2^-11, bf16 2^-8, fp32 2^-24):
- operands: rounding W and x to the bank dtype changes each product w*x by a relative
  (1+u)^2 - 1 <= 2u + u^2; products of two 16-bit values are exact in float32.
- accumulation of n terms with rounding after every step: |error| <= gamma_n * sum|w*x|,
  gamma_n = n*u / (1 - n*u) (the standard recursive-summation bound). Each lane sums
  n = K_padded / lanes column products; the host's final sum over lanes and units is
  float32 (n' = lanes*units terms, u = 2^-24) and is folded in the same way.
"""

from __future__ import annotations

import numpy as np
import pytest

from sim.functional import DeviceMemory, execute, round_to
from sim.hwio import load_hardware
from sim.isa import Act, BufRef, ClrAcc, HostOp, Mac, Pre, RdAcc, Signal, Wait, WrGb, aff
from sim.program import Buffer, Loop, Program, Stream

UNIT_ROUNDOFF = {"fp16": 2.0**-11, "bf16": 2.0**-8, "fp32": 2.0**-24}


def gamma(n: int, u: float) -> float:
    return n * u / (1 - n * u)


def gemv(hw, m: int, k: int, channels: int, regs: int):
    """Program and weight placement for y = W x, W [m, k], lane mode.

    Output o = (c * units + u) * regs + r lives in register r of unit u (first bank of the
    unit) of channel c; its weight row fills rows r*T .. r*T+T-1 of that bank.
    """
    lanes, row, gbn = hw.pim.lanes, hw.row_elems, hw.gb_elems
    units, bpu = hw.units_per_channel, hw.pim.banks_per_unit
    chunk = min(gbn, row)
    tiles = -(-k // row)  # rows per output
    kp = tiles * row
    slots = channels * units * regs
    assert slots >= m
    per_ch = units * regs * lanes
    mac_loop = Loop("g", row // chunk, (
        WrGb(BufRef("x", aff(0, t=row, g=chunk), (chunk,)), 0),
        Mac(0, bpu, aff(0, g=chunk // lanes), chunk // lanes, 0, aff(0, r=1), "lane"),
    ))
    pim = Stream("pim", "pim", tuple(range(channels)), (
        ClrAcc(0, bpu, 0, regs),
        Loop("r", regs, (Loop("t", tiles, (Act(0, bpu, aff(0, r=tiles, t=1)), mac_loop,
                                           Pre(0, bpu))),)),
        RdAcc(0, bpu, 0, regs, BufRef("part", aff(0, ch=per_ch), (per_ch,))),
        Signal("done"),
    ))
    host = Stream("host", "host", (), (
        Wait(("done",)),
        HostOp("reduce_sum", (BufRef("y", 0, (slots,)),), (BufRef("part", 0, (slots, lanes)),)),
    ))
    prog = Program((pim, host), (Buffer("x", hw.pim.dtype, kp), Buffer("part", "fp32",
                   channels * per_ch), Buffer("y", "fp32", slots)), name="gemv")

    def place(mem: DeviceMemory, w: np.ndarray) -> None:
        wp = np.zeros((slots, kp), np.float32)
        wp[:m, :k] = w
        c, u, r, t = np.meshgrid(np.arange(channels), np.arange(units), np.arange(regs),
                                 np.arange(tiles), indexing="ij")
        o = (c * units + u) * regs + r
        data = wp.reshape(slots, tiles, row)[o.ravel(), t.ravel()]
        mem.write_rows(c.ravel(), u.ravel() * bpu, (r * tiles + t).ravel(), data)

    return prog, place, kp


def run_gemv(hw, w: np.ndarray, x: np.ndarray, channels: int, regs: int) -> np.ndarray:
    m, k = w.shape
    prog, place, kp = gemv(hw, m, k, channels, regs)
    mem = DeviceMemory(hw)
    place(mem, w)
    xp = np.zeros(kp, np.float32)
    xp[:k] = x
    return execute(prog, hw, mem, {"x": xp})["y"][:m]


@pytest.mark.parametrize("preset", ["hbm-pim", "aim-gddr6"])
@pytest.mark.parametrize("m,k,channels,regs", [(100, 300, 4, 4), (37, 1500, 3, 2),
                                               (16, 512, 1, 2)])
def test_gemv_matches_numpy(preset: str, m: int, k: int, channels: int, regs: int) -> None:
    hw = load_hardware(preset)
    rng = np.random.default_rng(m * k)
    w = rng.standard_normal((m, k)).astype(np.float32)
    x = rng.standard_normal(k).astype(np.float32)
    y = run_gemv(hw, w, x, channels, regs)

    dt, acc = hw.pim.dtype, hw.pim.accum_dtype
    wr, xr = round_to(w, dt).astype(np.float64), round_to(x, dt).astype(np.float64)
    absprod = np.abs(wr) @ np.abs(xr)
    n_acc = -(-k // hw.row_elems) * hw.row_elems // hw.pim.lanes
    n_host = hw.pim.lanes
    tol = (gamma(n_acc, UNIT_ROUNDOFF[acc]) + gamma(n_host, 2.0**-24)) * absprod * 1.001
    # against the rounded operands only accumulation error remains
    assert np.all(np.abs(y - wr @ xr) <= tol + 1e-30)
    # against the exact operands the operand rounding adds 2u + u^2 per product
    u = UNIT_ROUNDOFF[dt]
    exact = w.astype(np.float64) @ x.astype(np.float64)
    assert np.all(np.abs(y - exact) <= tol + (2 * u + u * u) * absprod * 1.001)


def test_fp16_accumulator_rounds_every_column() -> None:
    """1 + 32 * 2^-12 in fp16 steps stays 1 (each step ties to even); fp32 would give 1.0078."""
    hw = load_hardware("hbm-pim")
    k = hw.row_elems
    w = np.zeros((1, k), np.float32)
    w[0, :] = 2.0**-12
    w[0, 0] = 1.0
    x = np.zeros(k, np.float32)
    x[::16] = 1.0  # lane 0 of every column: 1 followed by 31 terms of 2^-12
    y = run_gemv(hw, w, x, 1, 1)
    assert y[0] == 1.0


def test_bf16_operands_are_rounded() -> None:
    hw = load_hardware("aim-gddr6")
    w = np.full((1, 16), 1.0 + 2.0**-9, np.float32)  # rounds to 1.0 in bf16
    x = np.ones(16, np.float32)
    assert run_gemv(hw, w, x, 1, 1)[0] == 16.0
