"""The plain-memory baseline GEMV: the device used as ordinary DRAM.

``W`` is stored row-major, cut into row-sized chunks dealt round-robin over banks, then
channels, then rows (chunk ``g`` = ``(rw * C + ch) * banks + bank``). Each step
activates the same row in every bank (the activations overlap one another up to tFAW),
then reads column by column, rotating over the banks so consecutive reads hit different
bank groups (tCCD_S, not tCCD_L, spaces them), into the host buffer ``Wh``, then
precharges. The host multiplies once everything has arrived. PIM
speed-ups are measured against this kernel's simulated latency.
"""

from __future__ import annotations

from functools import partial

import numpy as np

from ..errors import AutoschedError
from ..hardware import Hardware
from ..isa import Act, BufRef, Pre, RdBank, Signal, Wait, aff
from ..program import Buffer, Loop, Node, Program, Stream
from .base import Kernel, ceil_div, loop
from .epilogue import NO_EPILOGUE, Epilogue

__all__ = ["baseline_reason", "baseline_rows", "gemv_baseline", "place_baseline"]


def place_baseline(hw: Hardware, rows: int, mem, tensors: dict[str, np.ndarray]) -> None:
    """Write ``tensors["W"]`` row-major over (row, channel, bank), zero-padded."""
    w = np.asarray(tensors["W"], dtype=np.float32).reshape(-1)
    nb, nch, e = hw.org.banks_per_channel, hw.org.channels, hw.row_elems
    data = np.zeros(rows * nch * nb * e, np.float32)
    data[: w.size] = w
    g = np.arange(rows * nch * nb)
    mem.write_rows((g // nb) % nch, g % nb, g // (nch * nb), data.reshape(-1, e))


def baseline_rows(hw: Hardware, n: int, k: int) -> int:
    """Rows per bank the plain-memory layout of ``W[n, k]`` needs."""
    return ceil_div(n * k, hw.org.channels * hw.org.banks_per_channel * hw.row_elems)


def baseline_reason(hw: Hardware, n: int, k: int) -> str | None:
    """Why ``W[n, k]`` does not fit the plain-memory layout (None: it fits); the GEMV
    space's host placement checks this same rule."""
    rows = baseline_rows(hw, n, k)
    if rows > hw.org.rows_per_bank:
        return f"W of {n}x{k} needs {rows} rows per bank, the bank has {hw.org.rows_per_bank}"
    return None


def gemv_baseline(hw: Hardware, n: int, k: int, batch: int = 1, *,
                  epilogue: Epilogue = NO_EPILOGUE) -> Kernel:
    """``y[batch, n] = x @ W^T`` with every weight read to the host; tensors ``x``, ``W``;
    ``epilogue`` fused into the multiply as in :func:`~sim.kernels.gemv.gemv`."""
    if min(n, k, batch) < 1:
        raise AutoschedError(f"gemv_baseline needs positive n, k, batch; got {n}, {k}, {batch}")
    nb, nch, e, cpr = hw.org.banks_per_channel, hw.org.channels, hw.row_elems, hw.columns_per_row
    rows = baseline_rows(hw, n, k)
    if (why := baseline_reason(hw, n, k)) is not None:
        raise AutoschedError(why)
    ng, bpg = hw.org.bank_groups, hw.banks_per_group
    order = [(i % ng) * bpg + i // ng for i in range(nb)]  # consecutive banks: other groups
    lanes = hw.pim.lanes
    reads = tuple(
        RdBank(b, aff(0, c=1), 1,
               BufRef("Wh", aff(b * e, rw=nch * nb * e, ch=nb * e, c=lanes), (lanes,)))
        for b in order
    )
    body: list[Node] = [Act(b, 0, aff(0, rw=1)) for b in order]
    body += [Loop("c", cpr, reads), *(Pre(b, 0) for b in order)]
    pim = Stream("pim", "pim", tuple(range(nch)), (*loop("rw", rows, body),
                                                   Signal("weights")))
    mm, ebufs = epilogue.op(
        "matmul", (BufRef("x", aff(0), (batch, k)), BufRef("Wh", aff(0), (n, k))), batch, n)
    shapes = epilogue.shapes(batch, n)
    host = Stream("host", "host", (), (Wait(("weights",)), mm))
    dt = hw.pim.dtype
    bufs = (Buffer("x", dt, batch * k), Buffer("Wh", dt, rows * nch * nb * e), *ebufs)
    prog = Program((pim, host), bufs, name=f"gemv_baseline_{n}x{k}_b{batch}")
    return Kernel(prog, ("x", *epilogue.inputs()), "y", epilogue.out_shape(batch, n),
                  partial(place_baseline, hw, rows), input_shapes=((batch, k), *shapes),
                  padded_shapes=((batch, k), *shapes), staged=("Wh",))
