"""Element-wise kernels in the banks: ``z = x (add|mul) y`` or ``z = f(x)``.

Every channel and bank holds a share of the vectors, one bank row per step: the host
writes the operands into the row (binary: x in the first half of the columns, y in the
second), the units load a column (``Ew mov``), combine it (``Ew add|mul`` or ``Af``),
write the result back over the operand (``WrAcc``), and the host reads it (``RdBank``).
Bank-pair units serve their even banks, then their odd banks.
"""

from __future__ import annotations

from functools import partial

from ..errors import AutoschedError
from ..hardware import Hardware
from ..isa import Act, Af, BufRef, Ew, HostOp, Pre, RdBank, Signal, Wait, WrAcc, WrBank, aff
from ..program import Buffer, Loop, Node, Program, Stream
from .base import Kernel, ceil_div, loop

__all__ = ["BINARY_FNS", "elementwise"]

BINARY_FNS = ("add", "mul")


def _place_nothing(mem, tensors) -> None:
    """Element-wise kernels keep no weights in the banks: both operands come from the host."""


def elementwise(hw: Hardware, n: int, fn: str) -> Kernel:
    """``z[n]``; tensors ``{"x": [n], "y": [n]}`` for add/mul, ``{"x": [n]}`` for activations."""
    acts = hw.pim.activation_functions
    if fn not in BINARY_FNS and fn not in acts:
        raise AutoschedError(f"elementwise fn {fn!r} not available on {hw.name} "
                             f"(known: {', '.join((*BINARY_FNS, *acts))})")
    if not hw.pim.elementwise or hw.pim.register_lanes != hw.pim.lanes:
        raise AutoschedError(f"{hw.name} has no in-bank element-wise unit with "
                             "register_lanes == lanes: run the op on the host")
    if n < 1:
        raise AutoschedError(f"elementwise needs n >= 1, got {n}")
    binary = fn in BINARY_FNS
    o, cpr, lanes = hw.org, hw.columns_per_row, hw.pim.lanes
    cols = cpr // 2 if binary else cpr  # payload columns per row
    per_row = cols * lanes
    nb, nch = o.banks_per_channel, o.channels
    rows = ceil_div(n, nch * nb * per_row)
    if rows > o.rows_per_bank:
        raise AutoschedError(f"elementwise of {n} elements needs {rows} rows per bank, "
                             f"the bank has {o.rows_per_bank}: split the op")
    npad = rows * nch * nb * per_row
    out_col = cols if binary else 0

    def win(buf: str, bank: int) -> BufRef:
        return BufRef(buf, aff(bank * per_row, rw=nch * nb * per_row, ch=nb * per_row),
                      (per_row,))

    body: list[Node] = [Act(0, 1, aff(0, rw=1))]
    for bk in range(nb):
        body.append(WrBank(bk, aff(0), cols, win("x", bk)))
        if binary:
            body.append(WrBank(bk, aff(cols), cols, win("y", bk)))
    bpu = hw.pim.banks_per_unit
    for h in range(bpu):
        op = Ew(h, bpu, fn, aff(cols, c=1), aff(0)) if binary else Af(h, bpu, fn, aff(0))
        body.append(Loop("c", cols, (Ew(h, bpu, "mov", aff(0, c=1), aff(0)), op,
                                     WrAcc(h, bpu, aff(out_col, c=1), aff(0)))))
    body += [RdBank(bk, aff(out_col), cols, win("zp", bk)) for bk in range(nb)]
    body.append(Pre(0, 1))
    pim = Stream("pim", "pim", tuple(range(nch)), (*loop("rw", rows, body), Signal("ew")))
    host = Stream("host", "host", (), (
        Wait(("ew",)),
        HostOp("copy", (BufRef("z", aff(0), (n,)),), (BufRef("zp", aff(0), (n,)),)),
    ))
    dt = hw.pim.dtype
    names = ("x", "y") if binary else ("x",)
    bufs = [Buffer(b, dt, npad) for b in names]
    bufs += [Buffer("zp", dt, npad), Buffer("z", "fp32", n)]
    prog = Program((pim, host), tuple(bufs), name=f"elementwise_{fn}_{n}")
    return Kernel(prog, names, "z", (n,), partial(_place_nothing),
                  input_shapes=tuple((n,) for _ in names),
                  padded_shapes=tuple((npad,) for _ in names))
