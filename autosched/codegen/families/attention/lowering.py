"""Lowering of ``attention``: write the new k, v into the KV cache, scores, softmax, p v.

Inputs ``q`` ``[b*q, h*d]``, ``k``, ``v`` ``[b*q, kvh*d]`` (fp32, rotary applied), output
``y`` ``[b*q, h*d]``. The PIM streams (``attention_pim``) write the cache and compute or
read; the host stream sums lane partials or multiplies on the host, applies the masked
softmax (scale ``1/sqrt(d)``, positions ``>= l`` and, for ``q > 1``, future positions
excluded) and sums the sequence splits. Host score rows are ``[b, q, h, lp]``, the query
rows in the order of ``q`` itself, so every reshuffle is an affine address.
"""

from __future__ import annotations

import math

from search_spaces import Space, Workload
from search_spaces.attention import (
    AttnPlan,
    attention_default,
    attention_space,
    capacity_of,
    plan_attention,
)
from sim.hardware import Hardware
from sim.isa import BufRef, HostOp, Signal, Wait, aff
from sim.kernels import Kernel
from sim.program import Buffer, Node, Program, Stream

from ...lowering import Lowering
from .bound import attention_bound
from .streams import pim_stream

__all__ = ["AttentionLowering", "attention_kernel"]


def _host(pl: AttnPlan) -> tuple[Stream, list[Buffer]]:
    rows, lp, d = pl.b * pl.q * pl.h, pl.lp, pl.d
    five = (pl.b, pl.q, pl.kvh, pl.G)
    bufs = [Buffer("sc", "fp32", rows * lp), Buffer("pr", "fp32", rows * lp)]
    body: list[Node] = [Wait(tuple(f"s{si}" for si in range(pl.S)))]
    if pl.scores == "pim" and pl.k_mode == "lane":
        bufs.append(Buffer("sp", "fp32", rows * lp * 16))
        body.append(HostOp("reduce_sum", (BufRef("sc", aff(0), (rows, lp)),),
                           (BufRef("sp", aff(0), (rows, lp, 16)),), (("axis", -1),)))
    if pl.scores == "host":
        body.append(HostOp("matmul", (BufRef("sc", aff(0), (*five, lp)),),
                           (BufRef("q", aff(0), (*five, d)),
                            BufRef("kh", aff(0), (pl.b, 1, pl.kvh, lp, d)))))
    attrs: tuple = (("scale", 1.0 / math.sqrt(d)), ("limit", pl.l))
    if pl.q > 1:
        attrs += (("causal", pl.q), ("group", pl.h))
    body.append(HostOp("masked_softmax", (BufRef("pr", aff(0), (rows, lp)),),
                       (BufRef("sc", aff(0), (rows, lp)),), attrs))
    if pl.wsum == "pim":
        body += [Signal("p"), Wait(tuple(f"o{si}" for si in range(pl.S)))]
        if pl.S > 1:
            bufs.append(Buffer("yp", "fp32", pl.S * rows * d))
            body.append(HostOp("reduce_sum", (BufRef("y", aff(0), (rows * d,)),),
                               (BufRef("yp", aff(0), (pl.S, rows * d)),), (("axis", 0),)))
    else:
        body.append(HostOp("matmul", (BufRef("y", aff(0), (*five, d)),),
                           (BufRef("pr", aff(0), (*five, lp)),
                            BufRef("vh", aff(0), (pl.b, 1, pl.kvh, lp, d))), (("trans_b", 0),)))
    return Stream("host", "host", (), tuple(body)), bufs


def attention_kernel(workload: Workload, point: dict, hw: Hardware) -> Kernel:
    """The attention kernel of one valid point (see the module docstring)."""
    dims = workload.dims
    pl = plan_attention(dims, capacity_of(workload), point, hw)
    host, bufs = _host(pl)
    nq, nkv = pl.b * pl.q * pl.h * pl.d, pl.b * pl.q * pl.kvh * pl.d
    bufs += [Buffer("q", "fp32", nq), Buffer("k", "fp32", nkv), Buffer("v", "fp32", nkv),
             Buffer("y", "fp32", nq)]
    for name, t in (("kh", pl.K), ("vh", pl.V)):
        if t.kind == "plain":
            bufs.append(Buffer(name, hw.pim.dtype, pl.b * pl.kvh * pl.lp * pl.d))
    streams = (*(pim_stream(pl, si) for si in range(pl.S)), host)
    prog = Program(streams, tuple(bufs), name=f"attention_{workload.digest}")
    shapes = ((pl.b * pl.q, pl.h * pl.d), (pl.b * pl.q, pl.kvh * pl.d),
              (pl.b * pl.q, pl.kvh * pl.d))
    return Kernel(prog, ("q", "k", "v"), "y", (pl.b * pl.q, pl.h * pl.d), _no_weights,
                  input_shapes=shapes, padded_shapes=shapes, rows=pl.rows)


def _no_weights(mem: object, tensors: dict) -> None:
    """Attention has no weights: the KV cache is written by the kernel itself."""


class AttentionLowering(Lowering):
    """Attention over the KV cache; no weights, the cache rows are ``Kernel.rows``."""

    families = ("attention",)

    def space(self, workload: Workload, hw: Hardware) -> Space:
        return attention_space(workload, hw)

    def default(self, workload: Workload, hw: Hardware) -> dict:
        return attention_default(workload, hw)

    def lower(self, workload: Workload, point: dict, hw: Hardware) -> Kernel:
        return attention_kernel(workload, point, hw)

    def bound(self, workload: Workload, hw: Hardware) -> float:
        return attention_bound(workload, hw)

