"""What the attention streams' walks share: the loops over a channel's slots (a batch
group's sequences times its kv-head groups) and query-row groups, and row addresses."""

from __future__ import annotations

from collections.abc import Sequence

from search_spaces.attention import AttnLayout, TensorLayout
from sim.isa import Affine, aff
from sim.kernels.base import affine_sum, loop_nest
from sim.program import Node

__all__ = ["in_slots", "query_groups", "scaled", "slot_row"]


def query_groups(pl: AttnLayout, rows: int, bj: int = 0
                 ) -> tuple[list[tuple[str, int]], list[Affine]]:
    """Loops over groups of ``rows`` query rows of one kv head, and each row's index.

    The index is into the flattened ``[b, q, h]`` query rows (batch group ``bj``'s loop
    variable ``bi`` counting its own sequences); rows of a group are consecutive heads of
    one token (``rows <= G``) or whole GQA groups of tokens.
    """
    g = aff(bj * pl.bpb * pl.q * pl.h, gs=pl.kc * pl.G, ch=pl.G, bi=pl.q * pl.h)
    if rows <= pl.G:
        loops = [("i", pl.q), ("jg", pl.G // rows)]
        idx = [affine_sum(g, t, i=pl.h, jg=rows) for t in range(rows)]
    else:
        tg = rows // pl.G
        loops = [("ig", pl.q // tg)]
        idx = [affine_sum(g, (t // pl.G) * pl.h + t % pl.G, ig=tg * pl.h) for t in range(rows)]
    return loops, idx


def in_slots(pl: AttnLayout, body: list[Node], inner: Sequence[tuple[str, int]] = ()
           ) -> list[Node]:
    """``body`` in the loops over a group's sequences and kv-head groups, around ``inner``
    loops."""
    return loop_nest([("bi", pl.bpb), ("gs", pl.kvh // pl.kc), *inner], body)


def slot_row(pl: AttnLayout, t: TensorLayout) -> Affine:
    """First row of the current slot's region of ``t`` (loop variables ``bi``, ``gs``)."""
    per = t.slot_rows
    return aff(t.base, bi=(pl.kvh // pl.kc) * per, gs=per)


def scaled(a: Affine, k: int) -> Affine:
    """``k * a``."""
    return Affine(a.base * k, tuple((v, s * k) for v, s in a.terms))
