"""A normalisation over the last dim, however a module spells it: the op (``rms_norm``,
``layer_norm``, ``native_layer_norm``) or the arithmetic (``x * rsqrt(mean(x^2) + eps)``,
centred or not, then an optional weight multiply and bias add).

:func:`find_norm` describes what it found (centred or not, its input, result, eps and
parameters, every node it covers); the norm families' recognisers decide which of them
each takes.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .aten import AtenGraph, opname
from .match import affine_tail, args, mean_last, rows, scalar, square_of

__all__ = ["FoundNorm", "find_norm"]

Node = torch.fx.Node
_OPS = {"rms_norm": False, "layer_norm": True, "native_layer_norm": True}


@dataclass
class FoundNorm:
    """A normalisation of ``x`` (rows ``m`` of ``n``) whose result is ``out``; ``centred``
    for LayerNorm's mean subtraction; ``params``: ``w`` and ``b`` by parameter name."""

    centred: bool
    x: Node
    out: Node
    m: int
    n: int
    eps: float
    params: dict[str, str]
    nodes: set[Node]


def _op(g: AtenGraph, node: Node) -> FoundNorm | None:
    name = opname(node)
    m, n = rows(node if name != "native_layer_norm" else node.args[0])
    if name == "rms_norm":
        x, _, w = args(node, "input", "normalized_shape", "weight")
        b, eps = None, args(node, "eps")[0]
    else:
        x, _, w, b, eps = args(node, "input", "normalized_shape", "weight", "bias", "eps")
    out = node
    if name == "native_layer_norm":
        outs = [u for u in g.users[node] if opname(u) == "getitem" and u.args[1] == 0]
        if len(outs) != 1:
            return None
        out = outs[0]
    params = {k: g.param(v) for k, v in (("w", w), ("b", b)) if v is not None}
    if None in params.values():
        return None
    eps = 1e-6 if eps is None else float(eps)  # torch's rms_norm default: machine eps
    return FoundNorm(_OPS[name], g.root(x), out, m, n, eps, params, {node, out})


def find_norm(g: AtenGraph, node: Node) -> FoundNorm | None:
    """Anchored at ``rsqrt``, ``rms_norm`` or ``layer_norm`` (the result may be later)."""
    if opname(node) in _OPS:
        return _op(g, node)
    if opname(node) != "rsqrt":
        return None
    arg = g.root(node.args[0])
    if opname(arg) != "add" or scalar(arg.args[1]) is None:
        return None
    eps, sq = scalar(arg.args[1]), mean_last(g, arg.args[0])
    x = square_of(g, sq) if sq is not None else None
    if x is None:
        return None
    claimed = {node, arg, g.root(arg.args[0]), g.root(sq)}
    centred = None
    if opname(x) == "sub" and mean_last(g, x.args[1]) is not None and \
            g.root(mean_last(g, x.args[1])) is g.root(x.args[0]):
        centred, x = x, g.root(x.args[0])
        claimed |= {centred, g.root(centred.args[1])}
    def _same_centred(v: object) -> bool:  # x - mean(x), computed once more (Cohere)
        return centred is not None and isinstance(v, Node) and opname(v) == "sub" and \
            g.root(v.args[0]) is x and g.root(v.args[1]) is g.root(centred.args[1])

    scaled = [u for u in g.alias_users(node) if opname(u) == "mul"
              and ({g.root(a) for a in u.args[:2]} == {node, centred or x}
                   or any(_same_centred(g.root(a)) for a in u.args[:2]))]
    if len(scaled) != 1:
        return None
    claimed.add(scaled[0])
    claimed |= {g.root(a) for a in scaled[0].args[:2] if _same_centred(g.root(a))}
    out, params = affine_tail(g, scaled[0], claimed)
    m, n = rows(out)
    return FoundNorm(centred is not None, x, out, m, n, eps, params, claimed | {out})
