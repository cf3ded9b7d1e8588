"""The PIM streams of the attention lowering (one per batch group ``bj`` and sequence
split ``si``; the group's sequences are looped as ``bl``, global ``bi = bj * bpb + bl``).

Each stream: (when a head is padded, wait for the host's padded copies, ``pad``) write
the new tokens' k and v it owns into their cache slots (``WrBank`` between ``Act`` and
``Pre``), then per slot either MAC the scores (K on PIM) or read K to the host, read V to
the host when the weighted sum runs there, signal ``s{si}``; with the weighted sum on
PIM, wait for the probabilities (``p``), MAC them against V and signal ``o{si}``. With a
staged softmax (``AttnLayout.nst`` > 1) the scores run stage by stage, each stage's
positions (cache slots ``[lo, hi)``, which may end inside a K pass) followed by an
``s`` signal, and the weighted sum likewise, each stage's V passes after a ``p`` wait
and read out as a partial of its own.
"""

from __future__ import annotations

from search_spaces.attention import AttnLayout, TensorLayout
from sim.isa import Act, Affine, BufRef, Pre, RdBank, Signal, Wait, WrBank, aff
from sim.kernels.base import affine_sum, shift_refs
from sim.program import Node, Stream

from .scores import k_ranges, scores
from .slots import in_slots, query_groups, slot_row
from .wsum import v_range, wsum

__all__ = ["pim_stream", "pim_streams", "query_groups"]


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
                key = (bank, affine_sum(slot_row(pl, t), row + pc.row))
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
    return in_slots(pl, body) if body else []


def _reads(pl: AttnLayout, t: TensorLayout, bj: int, si: int, buf: str) -> list[Node]:
    """Read the live passes of a plain-layout tensor into ``buf`` ``[b, kvh, lp, d]``."""
    passes = pl.passes_of(t, si)
    if passes == 0:
        return []
    bpg = pl.NB // pl.bg  # consecutive reads go to other bank groups (tCCD_S)
    order = [(i % pl.bg) * bpg + i // pl.bg for i in range(pl.NB)]
    row = affine_sum(slot_row(pl, t), p=1)
    d, per = pl.dk, pl.ppr * pl.dk  # a bank row holds ppr positions of dk elements
    head = aff(bj * pl.bpb * pl.kvh * pl.lp * d, bi=pl.kvh * pl.lp * d,
               gs=pl.kc * pl.lp * d, ch=pl.lp * d)
    base = affine_sum(head, si * t.chunk * d, p=pl.S * t.chunk * d)
    body: list[Node] = [Act(bk, 0, row) for bk in order]
    body += [RdBank(bk, 0, pl.ppr * pl.cols, BufRef(buf, affine_sum(base, bk * per), (per,)))
             for bk in order]
    body += [Pre(bk, 0) for bk in order]
    return in_slots(pl, body, [("p", passes)])


Parts = tuple[tuple[tuple[Node, ...], ...], tuple[tuple[Node, ...], ...]]


def _stagein_slots(pl: AttnLayout) -> list[tuple[int, int | None]]:
    """Cache slots ``[lo, hi)`` of every softmax stage (``hi`` None: to the end)."""
    b = pl.bounds
    return [(b[st], b[st + 1] if st + 1 < pl.nst else None) for st in range(pl.nst)]


def _compute(pl: AttnLayout, bj: int, si: int) -> Parts:
    """Per softmax stage: (scores or reads before an ``s`` signal, weighted sum after a
    ``p`` wait) of a stream."""
    if pl.scores != "pim":
        first = _reads(pl, pl.K, bj, si, "kh")
        if pl.wsum == "host":
            first += _reads(pl, pl.V, bj, si, "vh")
        return (tuple(first),), ((tuple(wsum(pl, bj, si)),) if pl.wsum == "pim" else ())
    stages = _stagein_slots(pl)
    first = tuple(tuple(scores(pl, bj, si, lo, hi)) for lo, hi in stages)
    if pl.wsum == "host":
        return (first[0] + tuple(_reads(pl, pl.V, bj, si, "vh")),), ()
    return first, tuple(tuple(wsum(pl, bj, si, lo, hi, st))
                        for st, (lo, hi) in enumerate(stages))


def _assemble(pl: AttnLayout, bj: int, si: int, compute: Parts | None) -> Stream:
    k = bj * pl.S + si
    body: list[Node] = [Wait(("pad",))] if (pl.dk, pl.dv) != (pl.d, pl.d) else []
    chans = tuple(range(k * pl.kc, (k + 1) * pl.kc))
    if compute is None:  # the host has every position: store the cache, read nothing back
        return Stream(f"pim{k}", "pim", chans, (*body, *_writes(pl, bj, si)))
    # with both products in the banks, v is stored while the host takes the softmax
    late = ("v",) if (pl.scores, pl.wsum) == ("pim", "pim") else ()
    body += _writes(pl, bj, si, tuple(n for n in ("k", "v") if n not in late))
    for part in compute[0]:  # a stage's scores, then its signal to the host's softmax
        body += [*part, Signal(f"s{k}")]
    if pl.wsum == "pim":
        body += _writes(pl, bj, si, late) if late else ()
        for part in compute[1]:
            body += [Wait(("p",)), *part]
        body.append(Signal(f"o{k}"))
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
    y = rows * dv + (dsi * pl.V.groups * pl.b * pl.q * pl.h * dv if pl.partials > 1 else 0)
    return {pl.buf("q"): rows * dk, "sp": pl.lanes * (rows * lp + dsi * pl.K.chunk),
            "sc": rows * lp + dsi * pl.K.chunk, "kh": heads + dsi * pl.K.chunk * dk,
            "vh": heads + dsi * pl.V.chunk * dk, "pr": rows * lp + dsi * pl.V.chunk,
            "yp" if pl.partials > 1 else pl.buf("y"): y}


def _shape_key(pl: AttnLayout, si: int) -> tuple:
    """What the compute part of stream ``si`` walks: per stage its K passes and position
    ranges and its V passes (streams alike in it differ by whole chunks only)."""
    stages = _stagein_slots(pl)
    if pl.scores != "pim":
        return (pl.passes_of(pl.K, si), pl.passes_of(pl.V, si))
    return (tuple(tuple(k_ranges(pl, si, lo, pl.lp if hi is None else hi))
                  for lo, hi in stages),
            tuple(v_range(pl, si, lo, hi) for lo, hi in stages))


def pim_streams(pl: AttnLayout) -> tuple[Stream, ...]:
    """Every PIM stream, as :func:`pim_stream` builds them: the compute part is built once
    per walk (:func:`_shape_key`) and moved into the other streams with the same walk
    (their windows differ by whole chunks and batch groups only)."""
    built: dict[tuple, tuple[int, Parts]] = {}
    out = []
    for bj in range(pl.Bs):
        for si in range(pl.S):
            if pl.own:
                out.append(_assemble(pl, bj, si, None))
                continue
            key = _shape_key(pl, si)
            if key not in built:
                built[key] = (si, _compute(pl, 0, si))
            si0, (a, b) = built[key]
            d = _deltas(pl, bj, si - si0)
            out.append(_assemble(pl, bj, si, (tuple(shift_refs(x, d) for x in a),
                                              tuple(shift_refs(x, d) for x in b))))
    return tuple(out)
