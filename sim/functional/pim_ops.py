"""Semantics of the bank commands, each vectorised over a stream's channels and banks.

Arithmetic: operands are values of the bank dtype held in float32, so every product is
exact in float32. Accumulation is rounded to ``hw.pim.accum_dtype`` after each column
step (fp32 accumulators sum a whole burst in float32 at once, fp16/bf16 ones round the
running sum after each column, still vectorised over channels and banks).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..activations import gelu_tanh, silu
from ..errors import SimError
from ..isa import Act, Af, ClrAcc, Ew, Instr, Mac, Pre, RdAcc, RdBank, WrAcc, WrBank, WrGb
from .dtypes import round_to
from .state import ChannelState, HostBuffers, Operand

__all__ = ["ACTIVATIONS", "PIM_HANDLERS"]

Eval = Callable[[object], Operand]


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


ACTIVATIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "relu": lambda x: np.maximum(x, 0.0),
    "gelu": gelu_tanh,
    "silu": silu,
    "sigmoid": _sigmoid,
    "tanh": np.tanh,
    "exp": np.exp,
}


def _act(st: ChannelState, ins: Act, ev: Eval, host: HostBuffers) -> None:
    bsl, _ = st.banks(ins.bank, ins.step)
    if (st.open[:, bsl] >= 0).any():
        raise SimError(f"act on bank {ins.bank} (step {ins.step}) whose row is already open: "
                       "pre first")
    row = ev(ins.row)
    st.open[:, bsl] = row[:, None] if isinstance(row, np.ndarray) else row


def _pre(st: ChannelState, ins: Pre, ev: Eval, host: HostBuffers) -> None:
    st.open[:, st.banks(ins.bank, ins.step)[0]] = -1


def _accumulate(st: ChannelState, a: np.ndarray, prod: np.ndarray) -> np.ndarray:
    """``a [..]`` plus the column terms ``prod [.., ncols on axis 2, ..]`` in accum dtype."""
    dtype = st.hw.pim.accum_dtype
    if dtype == "fp32":
        return a + prod.sum(axis=2, dtype=np.float32)
    if dtype == "fp16":  # the running sum is rounded after every column, as the adder does
        with np.errstate(over="ignore"):
            h = a.astype(np.float16)
            for i in range(prod.shape[2]):
                h = (h + prod[:, :, i]).astype(np.float16)  # f16 + f32 adds in f32, once
            return h.astype(np.float32)
    for i in range(prod.shape[2]):
        a = round_to(a + prod[:, :, i], dtype)
    return a


def _mac(st: ChannelState, ins: Mac, ev: Eval, host: HostBuffers) -> None:
    bsl, bidx = st.banks(ins.bank, ins.step)
    usl, uidx = st.units(ins.bank, ins.step)
    lanes, n, nc = st.lanes, st.n, ins.ncols
    if ins.fmt:  # a denser column of dequantized weights, each against its own element
        lanes *= st.hw.density(ins.fmt)
    v = st.read_cols(bsl, bidx, ev(ins.col), nc * lanes, lanes).reshape(n, len(bidx), nc, lanes)
    idx = st.acc_index(usl, uidx, ev(ins.reg))
    a = st.acc[idx][:, :, 0]
    gbo = ev(ins.gb)
    if ins.mode == "bcast":
        g = st.gb[st.gb_index(gbo, nc)]
        a = _accumulate(st, a, v * g[:, None, :, None])
    else:
        g = st.gb[st.gb_index(gbo, nc * lanes)].reshape(n, nc, lanes)
        if ins.mode == "lane":
            a = _accumulate(st, a, v * g[:, None])
        else:  # dot: the lanes' products are summed in float32 per column
            s = np.einsum("cbil,cil->cbi", v, g)
            lane = ev(ins.lane)
            if isinstance(lane, np.ndarray):
                pick = (st.cidx[:, None], np.arange(len(bidx))[None, :], lane[:, None])
            else:
                pick = (slice(None), slice(None), lane)
            a = a.copy()
            a[pick] = _accumulate(st, a[pick], s)
    st.acc[idx] = a[:, :, None]


def _reg_update(st: ChannelState, bank: int, step: int, reg: Operand,
                fn: Callable[[np.ndarray], np.ndarray]) -> None:
    usl, uidx = st.units(bank, step)
    idx = st.acc_index(usl, uidx, reg)
    st.acc[idx] = round_to(fn(st.acc[idx][:, :, 0]), st.hw.pim.accum_dtype)[:, :, None]


def _ew(st: ChannelState, ins: Ew, ev: Eval, host: HostBuffers) -> None:
    bsl, bidx = st.banks(ins.bank, ins.step)
    v = st.read_cols(bsl, bidx, ev(ins.col), st.lanes)
    fns = {"mov": lambda a: v, "add": lambda a: a + v, "mul": lambda a: a * v}
    _reg_update(st, ins.bank, ins.step, ev(ins.reg), fns[ins.fn])


def _af(st: ChannelState, ins: Af, ev: Eval, host: HostBuffers) -> None:
    with np.errstate(over="ignore"):
        _reg_update(st, ins.bank, ins.step, ev(ins.reg), ACTIVATIONS[ins.fn])


def _clr(st: ChannelState, ins: ClrAcc, ev: Eval, host: HostBuffers) -> None:
    usl, uidx = st.units(ins.bank, ins.step)
    st.acc[st.acc_index(usl, uidx, ev(ins.reg), ins.nregs)] = 0.0


def _wracc(st: ChannelState, ins: WrAcc, ev: Eval, host: HostBuffers) -> None:
    bsl, bidx = st.banks(ins.bank, ins.step)
    usl, uidx = st.units(ins.bank, ins.step)
    a = st.acc[st.acc_index(usl, uidx, ev(ins.reg))][:, :, 0]
    st.write_cols(bsl, bidx, ev(ins.col), a)


def _wrgb(st: ChannelState, ins: WrGb, ev: Eval, host: HostBuffers) -> None:
    vals = host.read(ins.src.buf, ev(ins.src.offset), ins.src.size)
    st.gb[st.gb_index(ev(ins.gb), ins.src.size)] = round_to(vals, st.hw.pim.dtype)


def _rdacc(st: ChannelState, ins: RdAcc, ev: Eval, host: HostBuffers) -> None:
    usl, uidx = st.units(ins.bank, ins.step)
    a = st.acc[st.acc_index(usl, uidx, ev(ins.reg), ins.nregs)]
    if ins.lanes:
        a = a[..., :ins.lanes]
    host.write(ins.dst.buf, ev(ins.dst.offset), a.reshape(st.n, -1))


def _rd(st: ChannelState, ins: RdBank, ev: Eval, host: HostBuffers) -> None:
    bsl, bidx = st.banks(ins.bank, 0)
    per = st.lanes * st.hw.density(ins.fmt)  # a packed row: the values the host dequantizes
    v = st.read_cols(bsl, bidx, ev(ins.col), ins.ncols * per, per)
    host.write(ins.dst.buf, ev(ins.dst.offset), v.reshape(st.n, -1))


def _wr(st: ChannelState, ins: WrBank, ev: Eval, host: HostBuffers) -> None:
    bsl, bidx = st.banks(ins.bank, 0)
    vals = host.read(ins.src.buf, ev(ins.src.offset), ins.src.size)
    st.write_cols(bsl, bidx, ev(ins.col), vals[:, None, :])


PIM_HANDLERS: dict[type[Instr], Callable[..., None]] = {
    Act: _act, Pre: _pre, Mac: _mac, Ew: _ew, Af: _af, ClrAcc: _clr, WrAcc: _wracc,
    WrGb: _wrgb, RdAcc: _rdacc, RdBank: _rd, WrBank: _wr,
}
