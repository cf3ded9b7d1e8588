"""The LayerNorm family's recogniser: ``layer_norm``, ``native_layer_norm``, or
``(x - mean) * rsqrt(var + eps)`` spelled out, then its weight and bias (either may be
absent: the family reads a missing weight as ones and a missing bias as zeros)."""

from __future__ import annotations

import math

import torch

from autosched.frontend.aten import AtenGraph, opname
from autosched.frontend.match import Kind, Match, rows
from autosched.frontend.norms import find_norm

__all__ = ["layernorm", "layernorm_heads"]

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


def _norm_at(g: AtenGraph, v: object):
    """The LayerNorm whose result is ``v`` (the op, or ``native_layer_norm``'s first
    output), else None."""
    if not isinstance(v, Node):
        return None
    op = opname(v)
    anchor = v if op == "layer_norm" else v.args[0] if (
        op == "getitem" and v.args[1] == 0 and isinstance(v.args[0], Node)
        and opname(v.args[0]) == "native_layer_norm") else None
    f = find_norm(g, anchor) if anchor is not None else None
    return f if f is not None and f.centred and f.out is v else None


def layernorm_heads(g: AtenGraph, node: Node) -> Match | None:
    """A list of LayerNorms, one per head, over the heads of one tensor split one by one
    and joined again (``split(x, 1, dim)``, norm ``i`` on head ``i``, ``cat(dim)``:
    StableLM's per-head q/k norms): one LayerNorm with attr ``heads`` and the heads'
    scales (and shifts) joined, ``w`` = ``norms.0.weight|norms.1.weight|...``."""
    if opname(node) != "cat" or not isinstance(node.args[0], list | tuple) or \
            len(node.args[0]) < 2:
        return None
    parts = list(node.args[0])
    dim = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim", 0)
    norms = [_norm_at(g, v) for v in parts]
    if any(f is None for f in norms):
        return None
    heads = [f.x for f in norms]
    src = heads[0].args[0] if opname(heads[0]) == "getitem" else None
    if not isinstance(src, Node) or opname(src) not in ("split", "split_with_sizes") or \
            len(src.meta["val"]) != len(parts):
        return None
    rank = len(AtenGraph.shape(node))
    sizes = src.args[1]
    sdim = src.args[2] if len(src.args) > 2 else src.kwargs.get("dim", 0)
    if (sizes != 1 and list(sizes) != [1] * len(parts)) or sdim % rank != dim % rank or \
            dim % rank == rank - 1:
        return None
    if any(opname(h) != "getitem" or h.args[0] is not src or h.args[1] != i
           for i, h in enumerate(heads)):
        return None
    f0 = norms[0]
    if any(f.eps != f0.eps or f.n != f0.n or set(f.params) != set(f0.params)
           for f in norms):
        return None
    params = {k: "|".join(f.params[k] for f in norms) for k in f0.params}
    claimed = set().union(*(f.nodes for f in norms)) | set(heads) | {src, node}
    return Match(Kind.NORM, "layernorm", node, [g.root(src.args[0])],
                 dict(m=rows(node)[0], n=f0.n),
                 {"eps": f0.eps, "heads": len(parts)}, params, claimed)
