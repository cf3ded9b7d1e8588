"""The pipelined row walk of the GEMV kernel (``GemvOpts.row_prefetch``).

With bank-pair units and interleaving, one output pass walks rows ``r = 0, 1, ...``, each
in bank 0 and then in bank 1. A PIM stream issues in order, so the plain walk
(:func:`~sim.kernels.gemv._rows`) activates both banks of a row before its MACs and
waits ``tRP`` + ``tRCD`` at every row. The pipelined walk issues each activation inside
the partner bank's MACs: bank 1's row ``r`` after the first ``head`` columns of bank 0's
row ``r`` (enough to cover bank 1's precharge), bank 0's row ``r + 1`` after the first
``head`` columns of bank 1's row ``r``. Only the pass's first activation is exposed; the
last row of a pass (peeled) prefetches nothing.

Per register and lane the MACs run in the plain walk's order (a row's first segment is
split into its first ``head`` columns and the rest, for every batch row), so results are
bit-identical to the plain walk's.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from ..hardware import Hardware
from ..isa import Act, Affine, Mac, Pre, aff
from ..program import Node
from .base import affine_sum, loop, loop_nest
from .gemv_layout import GemvLayout

__all__ = ["WrGbFn", "head_columns", "pipelined_tiles"]

WrGbFn = Callable[[GemvLayout, int, Affine, int], list[Node]]


def head_columns(hw: Hardware) -> int:
    """MAC columns issued before the partner bank's activation: enough that it lands
    ``tRP`` after that bank's precharge (issued just before them)."""
    pcol = max(1, math.ceil(hw.pim_column_ns / hw.org.tck_ns - 1e-9))
    return max(1, math.ceil((hw.timing.trp - 2) / pcol) + 1)


def _scale(a: Affine, k: int) -> Affine:
    return Affine(a.base * k, tuple((v, s * k) for v, s in a.terms))


def _mac(pl: GemvLayout, bank: int, a: Affine, bb: Affine, q: Affine, c: Affine,
         half: int, col0: int, ncols: int) -> Mac:
    """One segment's MAC (batch row ``b`` a loop variable), columns ``col0 ..``."""
    if pl.opts.mode == "dot":
        reg, lane = a, affine_sum(_scale(bb, pl.spr), c)
    else:
        reg, lane = affine_sum(_scale(bb, pl.spr), c), aff(0)
    reg = affine_sum(reg, b=pl.R)
    gb = affine_sum(half + col0 * pl.g, _scale(q, pl.Kr), b=pl.T)
    col = affine_sum(_scale(c, pl.segcols), col0)
    return Mac(bank, pl.bpu, col, ncols, gb, reg, pl.opts.mode, lane)


def _bank_row(pl: GemvLayout, bank: int, a: Affine, bb: Affine, q: Affine, half: int,
              head: int, hook: tuple[Node, ...]) -> list[Node]:
    """Every MAC of one open row with ``hook`` issued after the first ``head`` columns of
    its first segment (for every batch row)."""
    j = min(head, pl.segcols)
    out = loop("b", pl.Br, (_mac(pl, bank, a, bb, q, aff(0), half, 0, j),))
    out += list(hook)
    if j < pl.segcols:
        out += loop("b", pl.Br, (_mac(pl, bank, a, bb, q, aff(0), half, j, pl.segcols - j),))
    if pl.spr > 1:
        rest = _mac(pl, bank, a, bb, q, aff(1, c=1), half, 0, pl.segcols)
        out += loop_nest((("c", pl.spr - 1), ("b", pl.Br)), (rest,))
    return out


def _row_body(pl: GemvLayout, t: Affine, half: int, head: int, ix: dict[str, Affine],
              prefetch: bool) -> list[Node]:
    """Both banks' MACs of one row; bank 1's activation inside bank 0's MACs, bank 0's
    next row's inside bank 1's (unless ``prefetch`` is false)."""
    per_t = pl.na * pl.nb * pl.rpsb
    a, bb, qb = ix["a"], ix["bb"], ix["qb"]
    row = affine_sum(_scale(t, per_t), _scale(a, pl.nb * pl.rpsb), _scale(bb, pl.rpsb), qb,
                     p=pl.ntiles * per_t)
    nxt = (Act(0, 2, affine_sum(row, 1)),) if prefetch else ()
    q0, q1 = _scale(qb, 2), affine_sum(_scale(qb, 2), 1)
    return [*_bank_row(pl, 0, a, bb, q0, half, head, (Act(1, 2, row),)), Pre(0, 2),
            *_bank_row(pl, 1, a, bb, q1, half, head, nxt), Pre(1, 2)]


def _walk(pl: GemvLayout, t: Affine, half: int, head: int, dims: list[tuple[str, int]],
          ix: dict[str, Affine], last: bool) -> list[Node]:
    """The row nest ``dims``; with ``last`` its final row is peeled and prefetches nothing."""
    if not dims:
        return _row_body(pl, t, half, head, ix, not last)
    (var, n), rest = dims[0], dims[1:]
    full = loop(var, n, _walk(pl, t, half, head, rest, {**ix, var: aff(0, **{var: 1})}, False))
    if not last:
        return full
    out = loop(var, n - 1, _walk(pl, t, half, head, rest, {**ix, var: aff(0, **{var: 1})},
                                 False)) if n > 1 else []
    return out + _walk(pl, t, half, head, rest, {**ix, var: aff(n - 1)}, True)


def _rows(pl: GemvLayout, t: Affine, half: int, head: int, last: bool) -> list[Node]:
    dims = [("a", pl.na), ("bb", pl.nb), ("qb", pl.rpsb)]
    return _walk(pl, t, half, head, dims, {}, last)


def pipelined_tiles(pl: GemvLayout, kk: int, head: int, wrgb: WrGbFn) -> list[Node]:
    """One pass's tile loop with the pipelined row walk: the pass's first row activated
    first, every later activation hidden in the partner bank's MACs. ``wrgb(pl, kk, t,
    half)`` broadcasts tile ``t`` (the plain kernel's own)."""
    first = affine_sum(p=pl.ntiles * pl.na * pl.nb * pl.rpsb)
    out: list[Node] = [Act(0, 2, first)]
    if not pl.opts.double_buffer:
        t = aff(0, t=1)
        if pl.ntiles > 1:
            out += loop("t", pl.ntiles - 1, (*wrgb(pl, kk, t, 0), *_rows(pl, t, 0, head, False)))
        last = aff(pl.ntiles - 1)
        return out + [*wrgb(pl, kk, last, 0), *_rows(pl, last, 0, head, True)]
    hb, m = pl.Br * pl.T, pl.ntiles // 2
    out += wrgb(pl, kk, aff(0), 0)
    steady = (*wrgb(pl, kk, aff(1, t2=2), hb), *_rows(pl, aff(0, t2=2), 0, head, False),
              *wrgb(pl, kk, aff(2, t2=2), 0), *_rows(pl, aff(1, t2=2), hb, head, False))
    if m > 1:
        out += loop("t2", m - 1, steady)
    lt = pl.ntiles - 2
    return out + [*wrgb(pl, kk, aff(lt + 1), hb), *_rows(pl, aff(lt), 0, head, False),
                  *_rows(pl, aff(lt + 1), hb, head, True)]
