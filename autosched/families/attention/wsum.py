"""The V walk of attention: the weighted sum ``p v`` MACed in the banks, one stage of the
cache slots at a time (the whole cache when the softmax has one stage)."""

from __future__ import annotations

import dataclasses

from search_spaces.attention import AttnLayout
from sim.isa import Act, Affine, BufRef, ClrAcc, Mac, Pre, RdAcc, WrGb, aff
from sim.kernels.base import affine_sum, ceil_div, loop
from sim.program import Node

from .slots import in_slots, query_groups, scaled, slot_row

__all__ = ["v_range", "wsum"]


def v_range(pl: AttnLayout, si: int, lo: int, hi: int | None) -> tuple[int, int]:
    """The V passes ``[a, b)`` of stream ``si`` over cache slots ``[lo, hi)`` (pass
    ``rho`` holds slots from ``(rho * S + si) * chunk``; ``hi`` None: to the end)."""
    n, c = pl.passes_of(pl.V, si), pl.V.chunk
    a = max(0, ceil_div(lo // c - si, pl.S))
    b = n if hi is None else min(n, max(0, ceil_div(hi // c - si, pl.S)))
    return a, max(a, b)


def wsum(pl: AttnLayout, bj: int, si: int, lo: int = 0, hi: int | None = None,
          st: int = 0) -> list[Node]:
    """MAC the probabilities of ``qv`` query rows against every live V pass (of softmax
    stage ``st``: cache slots ``[lo, hi)``).

    One V group: each pass activates its row, MACs and precharges. With ``G_v`` groups,
    pass ``rho`` runs on group ``rho % G_v`` (its own region of the global buffer) and
    activates the row of pass ``rho + G_v - 1``, whose group has just precharged, after
    the first columns of its own MACs (in a loop over rounds of ``G_v`` passes, the
    passes before the first whole round and after the last unrolled); each group's sums
    are read out as a partial of their own (and each stage's)."""
    loops, idx = query_groups(pl, pl.qv, bj)
    V, vst, cpp, qv = pl.V, pl.vstep, pl.cpp, pl.qv
    chunk, ng = V.chunk, V.groups
    r_a, r_b = v_range(pl, si, lo, hi)  # none: the partial read out is zeros
    row0 = slot_row(pl, V)
    k = min(chunk, max(1, pl.vsplit))  # columns before the next activation

    def vpass(r: Affine, g: int, act: list[Node]) -> list[Node]:
        bank, base = g * V.gstep, g * qv * chunk
        start = affine_sum(scaled(r, ng * pl.S * chunk), (si + g * pl.S) * chunk)
        body: list[Node] = [WrGb(BufRef("pr", affine_sum(scaled(idx[t], pl.lp), start),
                                        (chunk,)), base + t * chunk) for t in range(qv)]
        if ng == 1:
            body.append(Act(bank, vst, affine_sum(row0, r)))
        macs = [Mac(bank, vst, eb * chunk, chunk, base + t * chunk, t * cpp + eb, "bcast")
                for t in range(qv) for eb in range(cpp)]
        if act and k < chunk:
            m = macs[0]
            macs[0:1] = [dataclasses.replace(m, ncols=k), *act, dataclasses.replace(
                m, col=affine_sum(m.col, k), ncols=chunk - k, gb=affine_sum(m.gb, k))]
        elif act:
            macs[1:1] = act
        return [*body, *macs, Pre(bank, vst)]

    def next_act(r: Affine, g: int, rho: int | None) -> list[Node]:
        """The activation pass ``(r, g)`` issues (``rho``: its index when unrolled)."""
        if ng == 1 or (rho is not None and rho + ng - 1 >= r_b):
            return []
        r2, g2 = divmod(g + ng - 1, ng)
        return [Act(g2 * V.gstep, vst, affine_sum(row0, r, r2))]

    def unrolled(rhos: range) -> list[Node]:
        out: list[Node] = []
        for rho in rhos:
            r, g = divmod(rho, ng)
            out += vpass(aff(r), g, next_act(aff(r), g, rho))
        return out

    if ng == 1:
        macs = loop("p", r_b - r_a, vpass(aff(r_a, p=1), 0, [])) if r_b > r_a else []
    else:  # rounds whose passes all activate one more row; the passes around unrolled
        first = min(r_b, ceil_div(r_a, ng) * ng)
        rounds = max(0, (r_b - first - 2 * ng + 1) // ng + 1)
        macs = []
        for rho in range(r_a, min(r_a + ng - 1, r_b)):
            r, g = divmod(rho, ng)
            macs.append(Act(g * V.gstep, vst, affine_sum(row0, r)))
        macs += unrolled(range(r_a, first))
        var = aff(first // ng, p=1)
        macs += loop("p", rounds, [x for g in range(ng) for x in vpass(var, g, next_act(
            var, g, None))]) if rounds else []
        macs += unrolled(range(first + rounds * ng, r_b))
    dv = pl.dv
    rows = pl.b * pl.q * pl.h * dv
    rd = []
    for g in range(ng):
        ybuf, off = (pl.buf("y"), 0) if pl.partials == 1 else \
            ("yp", ((st * pl.S + si) * ng + g) * rows)
        rd += [RdAcc(g * V.gstep, vst, t * cpp, cpp,
                     BufRef(ybuf, affine_sum(scaled(idx[t], dv), off), (dv,)))
               for t in range(qv)]
    inner = [ClrAcc(0, pl.vunits_step, 0, qv * cpp), *macs, *rd]
    return in_slots(pl, inner, loops)
