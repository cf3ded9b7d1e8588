"""Recognisers of the point-wise families: ``embedding``, ``argmax``, element-wise
``silu`` (or ``x * sigmoid(x)``), ``mul`` and ``add`` of two activations of one shape,
RMSNorm however spelled, and rotary embedding ``x * cos + rotate_half(x) * sin`` with
position-only ``cos``/``sin`` and ``rotate_half(x) = cat(-x[..., d/2:], x[..., :d/2])``;
the q and k rotations of one attention then merge into one operator
(:func:`merge_ropes`).
"""

from __future__ import annotations

import torch

from autosched.frontend.aten import AtenGraph, opname
from autosched.frontend.match import Kind, Match, numel, rows
from autosched.frontend.norms import find_norm

__all__ = ["argmax", "elementwise", "embedding", "merge_ropes", "rmsnorm", "rope"]

Node = torch.fx.Node


def embedding(g: AtenGraph, node: Node) -> Match | None:
    if opname(node) != "embedding" or g.param(node.args[0]) is None:
        return None
    table = g.shape(g.root(node.args[0]))
    ids = node.args[1]
    return Match(Kind.LOOKUP, "embedding", node, [g.root(ids)],
                 dict(m=numel(ids), n=table[1], v=table[0]),
                 params={"table": g.param(node.args[0])}, nodes={node})


def argmax(g: AtenGraph, node: Node) -> Match | None:
    if opname(node) != "argmax":
        return None
    x = node.args[0]
    dim = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim")
    if dim is None or dim % len(g.shape(x)) != len(g.shape(x)) - 1:
        return None
    m, n = rows(x)
    return Match(Kind.SELECT, "argmax", node, [g.root(x)], dict(m=m, n=n), nodes={node})


def elementwise(g: AtenGraph, node: Node) -> Match | None:
    name, ins = opname(node), node.args
    if name not in ("silu", "add", "mul"):
        return None
    m, n = rows(node)
    dims = dict(m=m, n=n)
    if name == "silu":
        return Match(Kind.POINTWISE, "elementwise", node, [g.root(ins[0])], dims,
                     {"fn": "silu"}, nodes={node})
    if name not in ("add", "mul") or len(ins) < 2:
        return None
    a, b = ins[:2]
    if not all(isinstance(v, Node) and v in g.active and numel(v) == numel(node)
               for v in (a, b)):
        return None
    if name == "add" and node.kwargs.get("alpha", 1) != 1:
        return None
    if name == "mul":  # x * sigmoid(x) is SiLU
        for x, s in ((a, b), (b, a)):
            if opname(s) == "sigmoid" and g.root(s.args[0]) is g.root(x) and \
                    g.users[s] == [node]:
                return Match(Kind.POINTWISE, "elementwise", node, [g.root(x)], dims, {"fn": "silu"},
                             nodes={node, s})
    return Match(Kind.POINTWISE, "elementwise", node, [g.root(a), g.root(b)], dims,
                 {"fn": name}, nodes={node})


def _rotate_half_of(g: AtenGraph, node: object) -> Node | None:
    node = g.root(node)
    if not isinstance(node, Node) or opname(node) != "cat" or len(node.args[0]) != 2:
        return None
    neg, lo = (g.root(a) for a in node.args[0])
    if opname(neg) != "neg" or opname(lo) != "slice":
        return None
    hi = g.root(neg.args[0])
    if opname(hi) != "slice":
        return None
    x = g.root(lo.args[0])
    d = g.shape(lo.args[0])[-1]
    if g.root(hi.args[0]) is not x or tuple(lo.args[1:4]) != (lo.args[1], 0, d // 2) or \
            hi.args[2] != d // 2 or (lo.args[1] - len(g.shape(lo.args[0]))) % 4 and \
            lo.args[1] != len(g.shape(lo.args[0])) - 1:
        return None
    return x


def rope(g: AtenGraph, node: Node) -> Match | None:
    if opname(node) != "add" or len(node.args) < 2:
        return None
    muls = [g.root(a) for a in node.args[:2]]
    if not all(isinstance(p, Node) and opname(p) == "mul" for p in muls):
        return None
    terms = []
    for p in muls:
        a, b = p.args[:2]
        act, tab = (a, b) if g.is_static(b) else (b, a)
        if not g.is_static(tab):
            return None
        terms.append((act, tab, p))
    for (x, cos, p1), (r, sin, p2) in (terms, terms[::-1]):
        if _rotate_half_of(g, r) is g.root(x):
            cat = g.root(r)
            neg = g.root(cat.args[0][0])
            claimed = {node, p1, p2, cat, neg, g.root(neg.args[0]), g.root(cat.args[0][1])}
            shape = g.shape(x)  # [b, heads, s, d] or [b, s, heads, d]: rows of b * s
            d = shape[-1]  # tokens, ``heads`` each; the tables broadcast over the heads
            tab = g.shape(cos) if len(g.shape(cos)) == len(shape) else ()
            heads = next((shape[i] for i in (1, 2) if len(shape) == 4 and tab
                          and tab[i] == 1), 1)
            return Match(Kind.ROTARY, "rope", node, [g.root(x)],
                         dict(m=numel(x) // (d * heads), h=heads, d=d),
                         nodes=claimed, extra={"cos": cos, "sin": sin, "x": x})
    return None


def rmsnorm(g: AtenGraph, node: Node) -> Match | None:
    """``rms_norm``, or ``x * rsqrt(mean(x^2) + eps)`` spelled out, then an optional weight."""
    f = find_norm(g, node)
    if f is None or f.centred or "b" in f.params:
        return None
    return Match(Kind.NORM, "rmsnorm", f.out, [f.x], dict(m=f.m, n=f.n), {"eps": f.eps},
                 f.params, f.nodes)


def merge_ropes(g: AtenGraph, matches: list[Match]) -> list[Match]:
    """One rotary operator per attention from its q and k rotations (same tables); the
    matches stay in graph order."""
    order = {n: i for i, n in enumerate(g.graph.nodes)}
    by_out = {m.out: m for m in matches}
    drop: set[int] = set()
    for a in (m for m in matches if m.kind is Kind.ATTENTION):
        rq, rk = by_out.get(a.ins[0]), by_out.get(a.ins[1])
        if rq is None or rk is None or rq.kind is not Kind.ROTARY or rk.kind is not Kind.ROTARY or \
                g.root(rq.extra["cos"]) is not g.root(rk.extra["cos"]):
            continue
        n_rows = a.dims["b"] * a.dims["q"]
        d = rq.dims["d"]
        heads = rq.dims["h"] + rk.dims["h"]
        later = max(rq, rk, key=lambda m: order[m.out])
        merged = Match(Kind.ROTARY, "rope", later.out, [rq.ins[0], rk.ins[0]],
                       dict(m=n_rows, h=heads, d=d),
                       nodes=rq.nodes | rk.nodes,
                       extra={**rq.extra, "q_out": rq.out, "k_out": rk.out,
                              "q_x": rq.extra["x"], "k_x": rk.extra["x"]})
        drop |= {id(rq), id(rk)}
        matches.append(merged)
        a.extra["qk_rotary"] = merged
    out = [m for m in matches if id(m) not in drop]
    out.sort(key=lambda m: order[m.out])
    return out
