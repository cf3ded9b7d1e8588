"""GEMV on the host over weights resident in the PIM layout: weights stored once.

``z[batch, n] = x[batch, k] @ W^T`` where ``W`` lives in the banks exactly as
:func:`sim.kernels.gemv.place_gemv` lays it out for the given layout options, so one copy
of the weights serves both placements. A PIM stream per used channel reads every row of
every bank the layout fills into the host buffer ``Wl`` (``[channel, bank slot, row,
row elements]``): each row step activates the row in those banks, reads column by column
rotating over bank groups (consecutive reads are tCCD_S apart) and precharges. The host
waits for the reads, then one ``matmul_layout`` op (epilogue fused) multiplies with the
weights where the layout put them (the host knows the layout: it skips the padding when
it multiplies).
The cost of the layout is charged: every row the layout fills, padding included, crosses
the channels' buses and is read by the host.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial

from ..hardware import Hardware
from ..isa import Act, BufRef, Pre, RdBank, Signal, Wait, aff
from ..program import Buffer, Loop, Node, Program, Stream
from .base import Kernel, loop
from .epilogue import NO_EPILOGUE, Epilogue
from .gemv import place_gemv, plan_json
from .gemv_layout import GemvLayout, GemvOpts, gemv_layout_of

__all__ = ["gemv_host", "layout_banks", "layout_plan"]


def layout_plan(hw: Hardware, n: int, k: int, layout: GemvOpts) -> GemvLayout:
    """The plan of the resident layout alone (batch rows and loop order do not move
    weights)."""
    return gemv_layout_of(hw, n, k, 1, replace(layout, batch_rows=1, loop_order="row_outer"))


def layout_banks(pl: GemvLayout) -> list[int]:
    """Banks of a channel the layout fills, by bank slot."""
    nh = 2 if pl.opts.interleave else 1
    return [(s // nh) * pl.bpu + s % nh for s in range(pl.U * nh)]


def gemv_host(hw: Hardware, n: int, k: int, batch: int, layout: GemvOpts, *,
              epilogue: Epilogue = NO_EPILOGUE) -> Kernel:
    """The host GEMV over the resident layout ``layout``; tensors ``x`` ``[batch, k]`` and
    ``W`` ``[n, k]``; output ``y`` ``[batch, n]``, ``epilogue`` fused into the multiply
    as in :func:`~sim.kernels.gemv.gemv`."""
    pl = layout_plan(hw, n, k, layout)
    banks = layout_banks(pl)
    rows, e, lanes = pl.rows_per_bank, hw.row_elems, hw.pim.lanes
    per_ch = len(banks) * rows * e
    bpg = hw.banks_per_group
    order = sorted(range(len(banks)), key=lambda s: (banks[s] % bpg, banks[s] // bpg))
    reads = tuple(RdBank(banks[s], aff(0, c=1), 1,
                         BufRef("Wl", aff(s * rows * e, ch=per_ch, r=e, c=lanes), (lanes,)))
                  for s in order)
    body: list[Node] = [Act(banks[s], 0, aff(0, r=1)) for s in order]
    body += [Loop("c", hw.columns_per_row, reads), *(Pre(banks[s], 0) for s in order)]
    pim = Stream("pim", "pim", tuple(range(pl.C)), (*loop("r", rows, body), Signal("weights")))
    mm, ebufs = epilogue.op(
        "matmul_layout",
        (BufRef("x", aff(0), (batch, k)), BufRef("Wl", aff(0), (pl.C * per_ch,))),
        batch, n, (("plan", plan_json(pl)),))
    shapes = epilogue.shapes(batch, n)
    host = Stream("host", "host", (), (Wait(("weights",)), mm))
    bufs = (Buffer("x", hw.pim.dtype, batch * k), Buffer("Wl", hw.pim.dtype, pl.C * per_ch),
            *ebufs)
    prog = Program((pim, host), bufs, name=f"gemv_host_{n}x{k}_b{batch}")
    return Kernel(prog, ("x", *epilogue.inputs()), "y", epilogue.out_shape(batch, n),
                  partial(place_gemv, pl),
                  input_shapes=((batch, k), *shapes), padded_shapes=((batch, k), *shapes),
                  staged=("Wl",))
