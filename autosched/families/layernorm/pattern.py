"""The LayerNorm family's recogniser: ``layer_norm``, ``native_layer_norm``, or
``(x - mean) * rsqrt(var + eps)`` spelled out, then its weight and bias (either may be
absent: the family reads a missing weight as ones and a missing bias as zeros)."""

from __future__ import annotations

import torch

from autosched.frontend.aten import AtenGraph
from autosched.frontend.match import Kind, Match
from autosched.frontend.norms import find_norm

__all__ = ["layernorm"]

Node = torch.fx.Node


def layernorm(g: AtenGraph, node: Node) -> Match | None:
    f = find_norm(g, node)
    if f is None or not f.centred:
        return None
    return Match(Kind.NORM, "layernorm", f.out, [f.x], dict(m=f.m, n=f.n), {"eps": f.eps},
                 f.params, f.nodes)
