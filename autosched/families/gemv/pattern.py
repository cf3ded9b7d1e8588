"""The GEMV family's recogniser: a linear layer, ``linear`` or ``mm``/``addmm``/``matmul``
against a transposed parameter, however the module spells it. A step of at most
:data:`GEMV_MAX_M` rows is a ``gemv`` (memory-bound: the banks' work), more a ``gemm``."""

from __future__ import annotations

import torch

from autosched.frontend.aten import AtenGraph, opname
from autosched.frontend.match import Kind, Match, args, numel, rows

__all__ = ["GEMV_MAX_M", "linear"]

Node = torch.fx.Node
GEMV_MAX_M = 8


def linear(g: AtenGraph, node: Node) -> Match | None:
    name = opname(node)
    if name == "linear":
        x, w, b = args(node, "input", "weight", "bias")
        wname = g.param(w)
    elif name in ("mm", "matmul"):
        x, wt = node.args[:2]
        b, wname = None, g.transposed_param(wt)
    elif name == "addmm":
        b, x, wt = node.args[:3]
        wname = g.transposed_param(wt)
    else:
        return None
    if wname is None or not isinstance(x, Node) or x not in g.active:
        return None
    params = {"W": wname}
    if b is not None:
        if g.param(b) is None:
            return None
        params["b"] = g.param(b)
    m, n = rows(node)
    k = numel(x) // m
    attrs = {"bias": 1} if b is not None else {}
    op = "gemv" if m <= GEMV_MAX_M else "gemm"
    return Match(Kind.LINEAR, op, node, [g.root(x)], dict(m=m, n=n, k=k), attrs, params,
                 {node})
