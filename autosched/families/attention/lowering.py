"""Family of ``attention``: write the new k, v into the KV cache, scores, softmax, p v.

Inputs ``q`` ``[b*q, h*d]``, ``k``, ``v`` ``[b*q, kvh*d]`` (fp32, rotary applied), output
``y`` ``[b*q, h*d]``. When the layout pads a head (``dk``, ``dv`` > ``d``: see
``search_spaces.attention.rules``) the host first widens q, k, v with zero lanes
(``qp``, ``kp``, ``vp``) and signals ``pad``, and narrows the result at the end. The PIM
streams (``attention_pim``) write the cache and compute or read; the host stream
multiplies on the host or takes the scores' lane partials (the softmax sums them in the
same op), applies the masked softmax (the workload's
scale, default ``1/sqrt(d)``; slots past the live ones and, for ``q > 1``, future
positions and positions outside a sliding window excluded) and sums the sequence splits.
A staged softmax (``softmax_stages``) takes each stage's columns as soon as the banks
signal them (``softmax_part``: the stage's probabilities, and its maximum and sum per
row after the probability rows in ``pr``) and merges the stages' partial outputs at the
end (``softmax_merge``, :mod:`sim.host_softmax`). A prompt from an empty cache with both
products on the host (``AttnLayout.own``) needs nothing back from the banks: the host
multiplies with its own k and v (permuted to ``[b, kvh, l, d]``) while the PIM streams
store the cache.
Host score rows are ``[b, q, h, lp]``, the query rows in the order of ``q`` itself, so
every reshuffle is an affine address.
"""

from __future__ import annotations

from search_spaces import Workload
from search_spaces.attention import (
    AttnLayout,
    attention_layout_of,
    capacity_of,
)
from sim.hardware import Hardware
from sim.isa import BufRef, HostOp, Signal, Wait, aff
from sim.kernels import Kernel
from sim.program import Buffer, Node, Program, Stream

from .streams import pim_streams

__all__ = ["attention_kernel"]


def _pad(src: str, dst: str, rows: int, win: int, wout: int) -> HostOp:
    return HostOp("pad_cols", (BufRef(dst, aff(0), (rows, wout)),),
                  (BufRef(src, aff(0), (rows, win)),))


def _staged(pl: AttnLayout, bufs: list[Buffer], scores: BufRef, attrs: tuple, waits: Wait,
            y: str) -> list[Node]:
    """The host's part of a staged softmax: per stage, wait for its scores, normalise its
    columns (``softmax_part``) and signal ``p``; then merge the stages' partial outputs
    by their weights (``softmax_merge``)."""
    rows, lp, dv, n = pl.b * pl.q * pl.h, pl.lp, pl.dv, pl.nst
    full = BufRef("pr", aff(0), (rows * lp + 2 * n * rows,))
    bounds = ",".join(str(b) for b in pl.bounds)
    body: list[Node] = []
    for st in range(n):
        body += [waits, HostOp("softmax_part", (full,), (scores, full), (
            *attrs, ("bounds", bounds), ("stage", st), ("rows", rows))), Signal("p")]
    bufs.append(Buffer("yp", "fp32", pl.partials * rows * dv))
    body += [Wait(tuple(f"o{k}" for k in range(pl.streams))),
             HostOp("softmax_merge", (BufRef(y, aff(0), (rows * dv,)),),
                    (BufRef("pr", aff(rows * lp), (n, rows, 2)),
                     BufRef("yp", aff(0), (pl.partials, rows * dv))))]
    return body


def _host(pl: AttnLayout, softcap: float = 0.0) -> tuple[Stream, list[Buffer]]:
    # score rows are lp slots wide, or l when the host multiplies with its own k and v
    lp = pl.l if pl.own else pl.lp
    rows, d, dk, dv = pl.b * pl.q * pl.h, pl.d, pl.dk, pl.dv
    kv_rows = pl.b * pl.q * pl.kvh
    five = (pl.b, pl.q, pl.kvh, pl.G)
    stats = 2 * pl.nst * rows if pl.nst > 1 else 0  # each stage's (max, sum) per row
    bufs = [Buffer("sc", "fp32", rows * lp), Buffer("pr", "fp32", rows * lp + stats)]
    body: list[Node] = []
    if dk != d:
        bufs += [Buffer("qp", "fp32", rows * dk), Buffer("kp", "fp32", kv_rows * dk)]
        body += [_pad("q", "qp", rows, d, dk), _pad("k", "kp", kv_rows, d, dk)]
    if dv != d:
        bufs += [Buffer("vp", "fp32", kv_rows * dv), Buffer("yv", "fp32", rows * dv)]
        body.append(_pad("v", "vp", kv_rows, d, dv))
    if body:
        body.append(Signal("pad"))
    if pl.own:  # k, v [b, l, kvh, width] as the host's [b, kvh, l, width]
        for name, src, width in (("kh", pl.buf("k"), pl.dk), ("vh", pl.buf("v"), pl.dv)):
            bufs.append(Buffer(name, "fp32", kv_rows * width))
            body.append(HostOp("permute", (BufRef(name, aff(0), (pl.b, pl.kvh, pl.l, width)),),
                               (BufRef(src, aff(0), (pl.b, pl.l, pl.kvh, width)),),
                               (("axes", "0,2,1,3"),)))
    scores = BufRef("sc", aff(0), (rows, lp))
    if pl.scores == "pim" and pl.k_mode == "lane":  # the softmax sums the lane partials
        bufs.append(Buffer("sp", "fp32", rows * lp * pl.lanes))
        scores = BufRef("sp", aff(0), (rows, lp, pl.lanes))
    attrs: tuple = (("scale", pl.scale), ("limit", pl.live))
    if softcap:  # Gemma 2's logit soft-capping: cap * tanh(scores / cap)
        attrs += (("softcap", softcap),)
    if pl.q > 1:
        attrs += (("causal", pl.q), ("group", pl.h))
        if 0 < pl.window < pl.l:
            attrs += (("window", pl.window),)
    waits = Wait(tuple(f"s{k}" for k in range(pl.streams)))
    y = pl.buf("y")
    if pl.nst > 1:  # each stage's softmax while the banks score the next, merged at the end
        body += _staged(pl, bufs, scores, attrs, waits, y)
    else:
        if not pl.own:
            body.append(waits)
        if pl.scores == "host":
            body.append(HostOp("matmul", (BufRef("sc", aff(0), (*five, lp)),),
                               (BufRef(pl.buf("q"), aff(0), (*five, dk)),
                                BufRef("kh", aff(0), (pl.b, 1, pl.kvh, lp, dk)))))
        body.append(HostOp("masked_softmax", (BufRef("pr", aff(0), (rows, lp)),), (scores,),
                           attrs))
    if pl.nst == 1 and pl.wsum == "pim":
        body += [Signal("p"), Wait(tuple(f"o{k}" for k in range(pl.streams)))]
        if pl.vparts > 1:  # one partial per sequence split and V group
            bufs.append(Buffer("yp", "fp32", pl.vparts * rows * dv))
            body.append(HostOp("reduce_sum", (BufRef(y, aff(0), (rows * dv,)),),
                               (BufRef("yp", aff(0), (pl.vparts, rows * dv)),),
                               (("axis", 0),)))
    elif pl.wsum == "host":
        body.append(HostOp("matmul", (BufRef(y, aff(0), (*five, dv)),),
                           (BufRef("pr", aff(0), (*five, lp)),
                            BufRef("vh", aff(0), (pl.b, 1, pl.kvh, lp, dv))), (("trans_b", 0),)))
    if y != "y":
        body.append(_pad(y, "y", rows, dv, d))
    return Stream("host", "host", (), tuple(body)), bufs


def attention_kernel(workload: Workload, point: dict, hw: Hardware) -> Kernel:
    """The attention kernel of one valid point (see the module docstring)."""
    dims = workload.dims
    scale = workload.attr("scale")
    pl = attention_layout_of(dims, capacity_of(workload), point, hw,
                        int(workload.attr("window", 0)), None if scale is None else float(scale))
    host, bufs = _host(pl, float(workload.attr("softcap", 0.0)))
    nq, nkv = pl.b * pl.q * pl.h * pl.d, pl.b * pl.q * pl.kvh * pl.d
    bufs += [Buffer("q", "fp32", nq), Buffer("k", "fp32", nkv), Buffer("v", "fp32", nkv),
             Buffer("y", "fp32", nq)]
    for name, t, width in (("kh", pl.K, pl.dk), ("vh", pl.V, pl.dv)):
        if t.kind == "plain" and not pl.own:
            bufs.append(Buffer(name, hw.pim.dtype, pl.b * pl.kvh * pl.lp * width))
    streams = (*pim_streams(pl), host)
    prog = Program(streams, tuple(bufs), name=f"attention_{workload.digest}")
    shapes = ((pl.b * pl.q, pl.h * pl.d), (pl.b * pl.q, pl.kvh * pl.d),
              (pl.b * pl.q, pl.kvh * pl.d))
    staged = tuple(b.name for b in bufs if b.name in ("kh", "vh"))
    return Kernel(prog, ("q", "k", "v"), "y", (pl.b * pl.q, pl.h * pl.d), _no_weights,
                  input_shapes=shapes, padded_shapes=shapes, rows=pl.rows, staged=staged)


def _no_weights(mem: object, tensors: dict) -> None:
    """Attention has no weights: the KV cache is written by the kernel itself."""
