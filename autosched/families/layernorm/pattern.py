"""The LayerNorm family's recogniser: ``layer_norm``, ``native_layer_norm``, or
``(x - mean) * rsqrt(var + eps)`` spelled out, then its weight and bias (either may be
absent: the family reads a missing weight as ones and a missing bias as zeros)."""

from __future__ import annotations

import math

import torch

from autosched.frontend.aten import AtenGraph
from autosched.frontend.match import Kind, Match
from autosched.frontend.norms import find_norm

__all__ = ["layernorm"]

Node = torch.fx.Node


def _numel(g: AtenGraph, name: str) -> int | None:
    """Elements of parameter ``name`` (a stored name: its derived transforms keep it)."""
    stored = name.partition("@")[0]
    for n in g.graph.nodes:
        ph = g.placeholder(n)
        if ph is not None and ph.kind == "param" and ph.target == stored:
            return math.prod(AtenGraph.shape(n))
    return None


def layernorm(g: AtenGraph, node: Node) -> Match | None:
    """A LayerNorm; weights of ``heads * n`` values normalise each head of a row on its own
    scale and shift (Cohere's per-head q/k norms: attr ``heads``)."""
    f = find_norm(g, node)
    if f is None or not f.centred:
        return None
    attrs: dict = {"eps": f.eps}
    sizes = {_numel(g, p) for p in f.params.values()}
    if sizes - {f.n}:
        if len(sizes) != 1 or None in sizes or next(iter(sizes)) % f.n or \
                f.m % (next(iter(sizes)) // f.n):
            return None
        attrs["heads"] = next(iter(sizes)) // f.n
    return Match(Kind.NORM, "layernorm", f.out, [f.x], dict(m=f.m, n=f.n), attrs,
                 f.params, f.nodes)
