"""Host-side layout glue between operators: concatenate and slice activation rows.

With one row (decode at batch 1) the compiler needs none of this: producers write
straight into windows of a shared buffer. With several rows, the row-major layouts of
a producer and its consumer differ, and these host-only kernels copy between them.
"""

from __future__ import annotations

from functools import partial

from sim.isa import BufRef, HostOp, aff
from sim.kernels import Kernel
from sim.program import Buffer, Loop, Program, Stream

__all__ = ["concat_rows", "slice_cols"]


def _no_weights(mem: object, tensors: dict) -> None:
    """Glue kernels place nothing in the banks."""


def concat_rows(m: int, widths: tuple[int, ...]) -> Kernel:
    """``y[m, sum(widths)]`` from inputs ``p0 [m, widths[0]]``, ``p1``, ... (per row)."""
    total = sum(widths)
    body, off = [], 0
    for i, w in enumerate(widths):
        body.append(Loop("r", m, (HostOp("copy", (BufRef("y", aff(off, r=total), (1, w)),),
                                         (BufRef(f"p{i}", aff(0, r=w), (1, w)),)),)))
        off += w
    bufs = [Buffer(f"p{i}", "fp32", m * w) for i, w in enumerate(widths)]
    prog = Program((Stream("host", "host", (), tuple(body)),),
                   (*bufs, Buffer("y", "fp32", m * total)), name=f"concat_{m}x{total}")
    names = tuple(f"p{i}" for i in range(len(widths)))
    return Kernel(prog, names, "y", (m, total), partial(_no_weights),
                  input_shapes=tuple((m, w) for w in widths),
                  padded_shapes=tuple((m, w) for w in widths))


def slice_cols(m: int, width: int, start: int, stop: int) -> Kernel:
    """``y[m, stop-start]`` = columns ``start:stop`` of input ``x [m, width]``."""
    n = stop - start
    body = (Loop("r", m, (HostOp("copy", (BufRef("y", aff(0, r=n), (1, n)),),
                                 (BufRef("x", aff(start, r=width), (1, n)),)),)),)
    prog = Program((Stream("host", "host", (), body),),
                   (Buffer("x", "fp32", m * width), Buffer("y", "fp32", m * n)),
                   name=f"slice_{m}x{width}_{start}_{stop}")
    return Kernel(prog, ("x",), "y", (m, n), partial(_no_weights),
                  input_shapes=((m, width),), padded_shapes=((m, width),))
