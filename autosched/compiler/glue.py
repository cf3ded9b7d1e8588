"""Host-side layout glue between operators: gather column slices and rows.

With one row (decode at batch 1) the compiler needs none of this: producers write
straight into windows of a shared buffer and consumers read windows. Otherwise the
row-major layouts of producers and consumer differ, and this host-only kernel copies:
output row ``r`` takes, from each input ``p<i>`` of width ``width_i``, columns
``lo_i:hi_i`` of row ``r * stride + offset`` (``stride = tokens, offset = tokens - 1``
picks each sequence's last token). Each input is one strided ``copy_cols`` op over all
rows (the first one clears the output).
"""

from __future__ import annotations

from functools import partial

from sim.isa import BufRef, HostOp, aff
from sim.kernels import Kernel
from sim.program import Buffer, Program, Stream

__all__ = ["gather"]


def _no_weights(mem: object, tensors: dict) -> None:
    """Glue kernels place nothing in the banks."""


def gather(rows_out: int, rows_in: int, parts: tuple[tuple[int, int, int], ...],
           stride: int = 1, offset: int = 0) -> Kernel:
    """``y[rows_out, sum(hi - lo)]`` from inputs ``p<i> [rows_in, width_i]``;
    ``parts[i] = (width_i, lo_i, hi_i)``."""
    total = sum(hi - lo for _, lo, hi in parts)
    body, col = [], 0
    out = BufRef("y", aff(0), (rows_out, total))
    for i, (width, lo, hi) in enumerate(parts):
        src = BufRef(f"p{i}", aff(0), (rows_out, stride * width))
        attrs = (("lo", lo + offset * width), ("hi", hi + offset * width), ("col", col),
                 ("clear", int(i == 0)))
        body.append(HostOp("copy_cols", (out,), (src, out), attrs))
        col += hi - lo
    bufs = [Buffer(f"p{i}", "fp32", rows_in * w) for i, (w, _, _) in enumerate(parts)]
    prog = Program((Stream("host", "host", (), tuple(body)),),
                   (*bufs, Buffer("y", "fp32", rows_out * total)),
                   name=f"gather_{rows_out}x{total}")
    shapes = tuple((rows_in, w) for w, _, _ in parts)
    return Kernel(prog, tuple(f"p{i}" for i in range(len(parts))), "y", (rows_out, total),
                  partial(_no_weights), input_shapes=shapes, padded_shapes=shapes)
