"""The PIM streams of the attention lowering (one per batch group ``bj`` and sequence
split ``si``; the group's sequences are looped as ``bl``, global ``bi = bj * bpb + bl``).

Each stream: (when a head is padded, wait for the host's padded copies, ``pad``) write
the new tokens' k and v it owns into their cache slots (``WrBank`` between ``Act`` and
``Pre``), then per slot either MAC the scores (K on PIM) or read K to the host, read V to
the host when the weighted sum runs there, signal ``s{si}``; with the weighted sum on
PIM, wait for the probabilities (``p``), MAC them against V and signal ``o{si}``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from search_spaces.attention import AttnLayout, TensorLayout
from sim.isa import (
    Act,
    Affine,
    BufRef,
    ClrAcc,
    Mac,
    Pre,
    RdAcc,
    RdBank,
    Signal,
    Wait,
    WrBank,
    WrGb,
    aff,
)
from sim.kernels.base import affine_sum, ceil_div, loop, loop_nest, shift_refs
from sim.program import Node, Stream

__all__ = ["pim_stream", "pim_streams", "query_groups"]


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


def _nest(loops: list[tuple[str, int]], body: list[Node]) -> list[Node]:
    return loop_nest(loops, body)


def _slots(pl: AttnLayout, body: list[Node], inner: Sequence[tuple[str, int]] = ()
           ) -> list[Node]:
    """``body`` in the loops over a group's sequences and kv-head groups, around ``inner``
    loops."""
    return _nest([("bi", pl.bpb), ("gs", pl.kvh // pl.kc), *inner], body)


def _slot_row(pl: AttnLayout, t: TensorLayout) -> Affine:
    per = t.slot_rows
    return aff(t.base, bi=(pl.kvh // pl.kc) * per, gs=per)


def _writes(pl: AttnLayout, bj: int, si: int, names: tuple[str, ...] = ("k", "v")
            ) -> list[Node]:
    """Store the new tokens' ``names`` tensors owned by stream ``(bj, si)``, in waves:
    wave ``w`` takes the ``w``-th opened row of every bank, activates them all, writes
    their pieces and precharges them, so one bank's activation overlaps another's (the
    command bus is in order: a bank at a time would pay every activation in turn), and
    the tokens sharing a bank row (a prompt's) take one Act."""
    runs: dict[tuple[int, Affine], list[Node]] = {}
    for name in names:
        t = pl.K if name == "k" else pl.V
        buf, w = pl.buf(name), pl.width(name)
        for i in range(pl.q):
            s, rho, x = pl.owner(t, pl.l - pl.q + i)
            if s != si:
                continue
            src0 = aff((bj * pl.bpb * pl.q + i) * pl.kvh * w, bi=pl.q * pl.kvh * w,
                       gs=pl.kc * w, ch=w)
            row, shift = t.at(rho)
            for pc in pl.pieces(t, x):
                bank = pc.bank + shift
                src = BufRef(buf, affine_sum(src0, pc.elem), (pc.ncols * pl.lanes,))
                key = (bank, affine_sum(_slot_row(pl, t), row + pc.row))
                runs.setdefault(key, []).append(WrBank(bank, pc.col, pc.ncols, src))
    waves: list[list[tuple[int, Affine]]] = []
    seen: dict[int, int] = {}
    for bank, row in runs:  # first-come order: a bank's rows in the order they are met
        w = seen.get(bank, 0)
        seen[bank] = w + 1
        if w == len(waves):
            waves.append([])
        waves[w].append((bank, row))
    body: list[Node] = []
    for wave in waves:
        body += [Act(bank, 0, row) for bank, row in wave]
        body += [wr for key in wave for wr in runs[key]]
        body += [Pre(bank, 0) for bank, _ in wave]
    return _slots(pl, body) if body else []


def _scores(pl: AttnLayout, bj: int, si: int) -> list[Node]:
    """MAC every live K pass against ``qk`` query rows held in the global buffer."""
    passes = pl.passes_of(pl.K, si)
    if passes == 0:
        return []
    loops, idx = query_groups(pl, pl.qk, bj)
    d, dc, lane_mode, lanes = pl.dk, pl.cols, pl.k_mode == "lane", pl.lanes
    run = min(pl.qk, pl.G)
    gbw = [WrGb(BufRef(pl.buf("q"), _scale(idx[t0], d), (run * d,)), t0 * d)
           for t0 in range(0, pl.qk, run)]
    row0 = affine_sum(_slot_row(pl, pl.K), p=pl.K.rows_per_pass)
    start = aff(0, p=pl.S * pl.K.chunk)
    pw = lanes if lane_mode else 1
    # registers of a set read out: all k_regs, or those a partly filled set uses (and
    # only its first lanes when it fills part of one register)
    nregs = pl.pps if lane_mode else ceil_div(pl.pps, lanes)
    part = pl.pps if not lane_mode and pl.pps < lanes else 0
    mode = "lane" if lane_mode else "dot"
    # the query in parts of qe elements when the global buffer cannot hold it whole: each
    # row of the cache MACs part by part, the part loaded before its columns
    qe = pl.qpart or d
    parts = [(h * qe, min(qe, d - h * qe)) for h in range(ceil_div(d, qe))]

    def macs(y: int, lo: int, n: int) -> list[Node]:
        w = y % pl.pps
        r, j = (w, 0) if lane_mode else divmod(w, lanes)
        return [Mac(0, pl.bpu, (y % pl.ppr) * dc + lo // lanes, n // lanes, t * qe,
                    t * pl.rpq + r, mode, j) for t in range(pl.qk)]

    def readout(y: int) -> list[Node]:
        first = si * pl.K.chunk + (y // pl.pps) * pl.U * pl.pps
        out: list[Node] = []
        for t in range(pl.qk):
            off = affine_sum(_scale(idx[t], pl.lp), start, first)
            dst = BufRef("sp" if lane_mode else "sc", _scale(off, pw), (pl.U * pl.pps * pw,))
            out.append(RdAcc(0, pl.bpu, t * pl.rpq, nregs, dst, part))
        return out

    body: list[Node] = []
    for y0 in range(0, pl.ppu, pl.ppr):  # one activated row of ppr positions at a time
        ys = range(y0, min(y0 + pl.ppr, pl.ppu))
        body.append(Act(0, pl.bpu, affine_sum(row0, y0 // pl.ppr)))
        for lo, n in parts:
            if len(parts) > 1:
                body += [WrGb(BufRef(pl.buf("q"), affine_sum(_scale(idx[t], d), lo), (n,)),
                              t * qe) for t in range(pl.qk)]
            for y in ys:
                if lo == 0 and y % pl.pps == 0:
                    body.append(ClrAcc(0, pl.bpu, 0, pl.qk * pl.rpq))
                body += macs(y, lo, n)
                if len(parts) == 1 and (y + 1) % pl.pps == 0:
                    body += readout(y)
        if len(parts) > 1:
            body += [x for y in ys if (y + 1) % pl.pps == 0 for x in readout(y)]
        body.append(Pre(0, pl.bpu))
    return _slots(pl, [*(gbw if len(parts) == 1 else []), *loop("p", passes, body)], loops)


def _scale(a: Affine, k: int) -> Affine:
    return Affine(a.base * k, tuple((v, s * k) for v, s in a.terms))


def _reads(pl: AttnLayout, t: TensorLayout, bj: int, si: int, buf: str) -> list[Node]:
    """Read the live passes of a plain-layout tensor into ``buf`` ``[b, kvh, lp, d]``."""
    passes = pl.passes_of(t, si)
    if passes == 0:
        return []
    bpg = pl.NB // pl.bg  # consecutive reads go to other bank groups (tCCD_S)
    order = [(i % pl.bg) * bpg + i // pl.bg for i in range(pl.NB)]
    row = affine_sum(_slot_row(pl, t), p=1)
    d, per = pl.dk, pl.ppr * pl.dk  # a bank row holds ppr positions of dk elements
    head = aff(bj * pl.bpb * pl.kvh * pl.lp * d, bi=pl.kvh * pl.lp * d,
               gs=pl.kc * pl.lp * d, ch=pl.lp * d)
    base = affine_sum(head, si * t.chunk * d, p=pl.S * t.chunk * d)
    body: list[Node] = [Act(bk, 0, row) for bk in order]
    body += [RdBank(bk, 0, pl.ppr * pl.cols, BufRef(buf, affine_sum(base, bk * per), (per,)))
             for bk in order]
    body += [Pre(bk, 0) for bk in order]
    return _slots(pl, body, [("p", passes)])


def _wsum(pl: AttnLayout, bj: int, si: int) -> list[Node]:
    """MAC the probabilities of ``qv`` query rows against every live V pass.

    One V group: each pass activates its row, MACs and precharges. With ``G_v`` groups,
    pass ``rho`` runs on group ``rho % G_v`` (its own region of the global buffer) and
    activates the row of pass ``rho + G_v - 1``, whose group has just precharged, after
    the first columns of its own MACs (in a loop over rounds of ``G_v`` passes, the last
    passes unrolled); each group's sums are read out as a partial of their own."""
    loops, idx = query_groups(pl, pl.qv, bj)
    V, st, cpp, qv = pl.V, pl.vstep, pl.cpp, pl.qv
    chunk, ng, n = V.chunk, V.groups, pl.passes_of(pl.V, si)
    row0 = _slot_row(pl, V)
    k = min(chunk, max(1, pl.vsplit))  # columns before the next activation

    def vpass(r: Affine, g: int, act: list[Node]) -> list[Node]:
        bank, base = g * V.gstep, g * qv * chunk
        start = affine_sum(_scale(r, ng * pl.S * chunk), (si + g * pl.S) * chunk)
        body: list[Node] = [WrGb(BufRef("pr", affine_sum(_scale(idx[t], pl.lp), start),
                                        (chunk,)), base + t * chunk) for t in range(qv)]
        if ng == 1:
            body.append(Act(bank, st, affine_sum(row0, r)))
        macs = [Mac(bank, st, eb * chunk, chunk, base + t * chunk, t * cpp + eb, "bcast")
                for t in range(qv) for eb in range(cpp)]
        if act and k < chunk:
            m = macs[0]
            macs[0:1] = [dataclasses.replace(m, ncols=k), *act, dataclasses.replace(
                m, col=affine_sum(m.col, k), ncols=chunk - k, gb=affine_sum(m.gb, k))]
        elif act:
            macs[1:1] = act
        return [*body, *macs, Pre(bank, st)]

    def next_act(r: Affine, g: int, rho: int | None) -> list[Node]:
        """The activation pass ``(r, g)`` issues (``rho``: its index when unrolled)."""
        if ng == 1 or (rho is not None and rho + ng - 1 >= n):
            return []
        r2, g2 = divmod(g + ng - 1, ng)
        return [Act(g2 * V.gstep, st, affine_sum(row0, r, r2))]

    var = aff(0, p=1)
    if ng == 1:
        macs = loop("p", n, vpass(var, 0, [])) if n else []
    else:  # rounds whose passes all activate one more row, then the rest unrolled
        rounds = max(0, (n - 2 * ng + 1) // ng + 1)
        macs = [Act(g * V.gstep, st, affine_sum(row0, 0)) for g in range(min(ng - 1, n))]
        macs += loop("p", rounds, [x for g in range(ng) for x in vpass(var, g, next_act(
            var, g, None))]) if rounds else []
        for rho in range(rounds * ng, n):
            r, g = divmod(rho, ng)
            macs += vpass(aff(r), g, next_act(aff(r), g, rho))
    dv, parts = pl.dv, pl.vparts
    rows = pl.b * pl.q * pl.h * dv
    rd = []
    for g in range(ng):
        ybuf, off = (pl.buf("y"), 0) if parts == 1 else ("yp", (si * ng + g) * rows)
        rd += [RdAcc(g * V.gstep, st, t * cpp, cpp,
                     BufRef(ybuf, affine_sum(_scale(idx[t], dv), off), (dv,)))
               for t in range(qv)]
    inner = [ClrAcc(0, pl.vunits_step, 0, qv * cpp), *macs, *rd]
    return _slots(pl, inner, loops)


def _compute(pl: AttnLayout, bj: int, si: int) -> tuple[tuple[Node, ...], tuple[Node, ...]]:
    """(scores or reads before the ``s`` signal, weighted sum after ``p``) of a stream."""
    first = _scores(pl, bj, si) if pl.scores == "pim" else _reads(pl, pl.K, bj, si, "kh")
    if pl.wsum == "host":
        first += _reads(pl, pl.V, bj, si, "vh")
    return tuple(first), tuple(_wsum(pl, bj, si)) if pl.wsum == "pim" else ()


def _assemble(pl: AttnLayout, bj: int, si: int,
              compute: tuple[tuple[Node, ...], tuple[Node, ...]] | None) -> Stream:
    k = bj * pl.S + si
    body: list[Node] = [Wait(("pad",))] if (pl.dk, pl.dv) != (pl.d, pl.d) else []
    chans = tuple(range(k * pl.kc, (k + 1) * pl.kc))
    if compute is None:  # the host has every position: store the cache, read nothing back
        return Stream(f"pim{k}", "pim", chans, (*body, *_writes(pl, bj, si)))
    # with both products in the banks, v is stored while the host takes the softmax
    late = ("v",) if (pl.scores, pl.wsum) == ("pim", "pim") else ()
    body += _writes(pl, bj, si, tuple(n for n in ("k", "v") if n not in late))
    body += [*compute[0], Signal(f"s{k}")]
    if pl.wsum == "pim":
        body += [*(_writes(pl, bj, si, late) if late else ()), Wait(("p",)), *compute[1],
                 Signal(f"o{k}")]
    return Stream(f"pim{k}", "pim", chans, tuple(body))


def pim_stream(pl: AttnLayout, bj: int, si: int) -> Stream:
    """The SPMD stream of batch group ``bj`` and sequence split ``si`` over its
    ``kv_channels`` channels; it signals ``s{k}`` and ``o{k}``, ``k = bj * S + si``."""
    return _assemble(pl, bj, si, None if pl.own else _compute(pl, bj, si))


def _deltas(pl: AttnLayout, dbj: int, dsi: int) -> dict[str, int]:
    """How far every buffer window of the compute part moves from stream ``(bj, si)`` to
    ``(bj + dbj, si + dsi)`` (batch group: ``bpb`` sequences of rows further; split: one
    chunk of positions further, and one partial-output block with ``yp``)."""
    rows, lp, dk, dv = dbj * pl.bpb * pl.q * pl.h, pl.lp, pl.dk, pl.dv
    heads = dbj * pl.bpb * pl.kvh * lp * dk
    y = rows * dv + (dsi * pl.V.groups * pl.b * pl.q * pl.h * dv if pl.vparts > 1 else 0)
    return {pl.buf("q"): rows * dk, "sp": pl.lanes * (rows * lp + dsi * pl.K.chunk),
            "sc": rows * lp + dsi * pl.K.chunk, "kh": heads + dsi * pl.K.chunk * dk,
            "vh": heads + dsi * pl.V.chunk * dk, "pr": rows * lp + dsi * pl.V.chunk,
            "yp" if pl.vparts > 1 else pl.buf("y"): y}


def pim_streams(pl: AttnLayout) -> tuple[Stream, ...]:
    """Every PIM stream, as :func:`pim_stream` builds them: the compute part is built once
    per (K passes, V passes) of a split and moved into the other streams with the same
    passes (their windows differ by whole chunks and batch groups only)."""
    built: dict[tuple[int, int], tuple[int, tuple[tuple[Node, ...], tuple[Node, ...]]]] = {}
    out = []
    for bj in range(pl.Bs):
        for si in range(pl.S):
            if pl.own:
                out.append(_assemble(pl, bj, si, None))
                continue
            key = (pl.passes_of(pl.K, si), pl.passes_of(pl.V, si))
            if key not in built:
                built[key] = (si, _compute(pl, 0, si))
            si0, (a, b) = built[key]
            d = _deltas(pl, bj, si - si0)
            out.append(_assemble(pl, bj, si, (shift_refs(a, d), shift_refs(b, d))))
    return tuple(out)
