"""The K walk of attention: scores ``q k^T`` MACed in the banks, one stage of the cache
slots at a time (the whole cache when the softmax has one stage).

A K pass gives every unit ``ppu`` positions in rows of ``ppr``; a register set of ``pps``
positions is read out once its last row is done. A stage may start and end inside a
pass, at whole rows of whole register sets; the passes it takes whole run in one loop.
"""

from __future__ import annotations

from search_spaces.attention import AttnLayout
from sim.isa import Act, Affine, BufRef, ClrAcc, Mac, Pre, RdAcc, WrGb, aff
from sim.kernels.base import affine_sum, ceil_div, loop
from sim.program import Node

from .slots import in_slots, query_groups, scaled, slot_row

__all__ = ["k_ranges", "scores"]


def k_ranges(pl: AttnLayout, si: int, lo: int, hi: int) -> list[tuple[int, int, int]]:
    """(pass, first position, end position) of each K pass of stream ``si`` whose unit
    positions score cache slots in ``[lo, hi)`` (a set of ``U * pps`` slots per
    ``pps`` positions of every unit: slot ``B + y * U`` starts position ``y``)."""
    out = []
    for p in range(pl.passes_of(pl.K, si)):
        b = (p * pl.S + si) * pl.K.chunk
        ylo = min(max(lo - b, 0), pl.ppu * pl.U) // pl.U
        yhi = min(max(hi - b, 0), pl.ppu * pl.U) // pl.U
        if ylo < yhi:
            out.append((p, ylo, yhi))
    return out


def scores(pl: AttnLayout, bj: int, si: int, lo: int = 0, hi: int | None = None
            ) -> list[Node]:
    """MAC every live K pass (of the positions scoring cache slots ``[lo, hi)``: one
    softmax stage) against ``qk`` query rows held in the global buffer."""
    ranges = k_ranges(pl, si, lo, pl.lp if hi is None else hi)
    if not ranges:
        return []
    loops, idx = query_groups(pl, pl.qk, bj)
    d, dc, lane_mode, lanes = pl.dk, pl.cols, pl.k_mode == "lane", pl.lanes
    run = min(pl.qk, pl.G)
    gbw = [WrGb(BufRef(pl.buf("q"), scaled(idx[t0], d), (run * d,)), t0 * d)
           for t0 in range(0, pl.qk, run)]
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

    def readout(y: int, start: Affine) -> list[Node]:
        first = si * pl.K.chunk + (y // pl.pps) * pl.U * pl.pps
        out: list[Node] = []
        for t in range(pl.qk):
            off = affine_sum(scaled(idx[t], pl.lp), start, first)
            dst = BufRef("sp" if lane_mode else "sc", scaled(off, pw), (pl.U * pl.pps * pw,))
            out.append(RdAcc(0, pl.bpu, t * pl.rpq, nregs, dst, part))
        return out

    def one_pass(p: Affine, ylo: int, yhi: int) -> list[Node]:
        """The rows of positions ``ylo .. yhi`` of pass ``p``."""
        row0 = affine_sum(slot_row(pl, pl.K), scaled(p, pl.K.rows_per_pass))
        start = scaled(p, pl.S * pl.K.chunk)
        body: list[Node] = []
        for y0 in range(ylo, yhi, pl.ppr):  # one activated row of ppr positions at a time
            ys = range(y0, min(y0 + pl.ppr, yhi))
            body.append(Act(0, pl.bpu, affine_sum(row0, y0 // pl.ppr)))
            for lo, n in parts:
                if len(parts) > 1:
                    body += [WrGb(BufRef(pl.buf("q"), affine_sum(scaled(idx[t], d), lo),
                                         (n,)), t * qe) for t in range(pl.qk)]
                for y in ys:
                    if lo == 0 and y % pl.pps == 0:
                        body.append(ClrAcc(0, pl.bpu, 0, pl.qk * pl.rpq))
                    body += macs(y, lo, n)
                    if len(parts) == 1 and (y + 1) % pl.pps == 0:
                        body += readout(y, start)
            if len(parts) > 1:
                body += [x for y in ys if (y + 1) % pl.pps == 0 for x in readout(y, start)]
            body.append(Pre(0, pl.bpu))
        return body

    # whole passes in one loop; a pass the stage takes only part of, on its own
    whole = [p for p, ylo, yhi in ranges if (ylo, yhi) == (0, pl.ppu)]
    body: list[Node] = []
    for p, ylo, yhi in ranges:
        if p not in whole:
            body += one_pass(aff(p), ylo, yhi)
        elif p == whole[0]:
            body += loop("p", len(whole), one_pass(aff(p, p=1), 0, pl.ppu))
    return in_slots(pl, [*(gbw if len(parts) == 1 else []), *body], loops)
