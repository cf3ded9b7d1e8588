"""The recogniser of a routed mixture of experts in a captured ATen graph.

Anchored at the block's result, it claims everything computed from one input ``x``
(the normalised hidden state) and parameters only, up to that result, when that
contains a ``topk`` over the softmax (or the logits) of a linear of ``x``: the router.
From the region it reads: the experts ``e`` (the router's rows) and ``k`` (the top-k),
whether the top-k weights are renormalised (a division of the top-k values by their
sum), the experts' stacked weights (the first 3-D parameter indexed by the chosen
experts is the gate|up projection ``[e, 2i, n]``, the second the down projection
``[e, n, i]``), the activation, and a shared expert: a sigmoid of a one-row linear of
``x`` gating an MLP of ``x`` (its gate is the linear the activation reads).
"""

from __future__ import annotations

import torch

from autosched.frontend.aten import AtenGraph, opname
from autosched.frontend.match import Kind, Match, rows

__all__ = ["moe"]

Node = torch.fx.Node
_BUDGET = 400
_ACTS = ("silu", "gelu", "relu")


def _topk(g: AtenGraph, node: Node) -> Node | None:
    """The nearest ``topk`` among ``node``'s ancestors (within a budget)."""
    seen, todo = set(), [node]
    while todo and len(seen) < _BUDGET:
        n = todo.pop(0)
        if n in seen or not isinstance(n, Node):
            continue
        seen.add(n)
        if opname(n) == "topk":
            return n
        todo.extend(n.all_input_nodes)
    return None


def _router(g: AtenGraph, topk: Node) -> Node | None:
    n = g.root(topk.args[0])
    while isinstance(n, Node) and opname(n) in ("softmax", "_softmax", "to", "_to_copy"):
        n = g.root(n.args[0])
    return n if isinstance(n, Node) and opname(n) == "linear" and \
        g.param(n.args[1]) is not None else None


def _region(g: AtenGraph, out: Node, x: Node) -> set[Node] | None:
    """Every node computing ``out`` from ``x`` and parameters (None when another input
    of the step feeds it)."""
    region, todo = set(), [out]
    while todo:
        n = todo.pop()
        if n in region or n is x or not isinstance(n, Node):
            continue
        if n.op == "placeholder":
            if g.placeholder(n) is not None and g.placeholder(n).kind != "param" and \
                    n in g.active:
                return None
            continue
        if n.op != "call_function":
            continue
        if g.root(n) is x and n is not out:
            region.add(n)
            continue
        region.add(n)
        if len(region) > _BUDGET:
            return None
        todo.extend(n.all_input_nodes)
    return region


def moe(g: AtenGraph, node: Node) -> Match | None:
    if opname(node) in ("topk", "getitem") or not isinstance(node.meta.get("val"),
                                                            torch.Tensor):
        return None
    topk = _topk(g, node)
    router = _router(g, topk) if topk is not None else None
    if router is None:
        return None
    x = g.root(router.args[0])
    if not isinstance(x, Node) or x is node:
        return None
    region = _region(g, node, x)
    if region is None or topk not in region:
        return None
    for n in region:  # no other input of the step, no value of the step but x
        for a in n.all_input_nodes:
            if a is not x and a.op == "placeholder" and g.placeholder(a) is not None and \
                    g.placeholder(a).kind in ("ids", "positions"):
                return None
            if a is not x and a not in region and a in g.active:
                return None
    m, n_hidden = rows(x)
    if rows(node) != (m, n_hidden):
        return None
    e = int(g.shape(router)[-1])
    k = int(topk.args[1])
    order = {nd: i for i, nd in enumerate(g.graph.nodes)}
    vals = [u for u in topk.users if opname(u) == "getitem" and u.args[1] == 0]
    norm = any(opname(n) in ("div", "div_") and g.root(n.args[0]) in vals for n in region)
    idx = sorted((n for n in region if opname(n) == "index" and g.param(n.args[0]) and
                  len(g.shape(n.args[0])) == 3), key=order.get)
    if len(idx) != 2:
        return None
    gu, dn = (g.param(n.args[0]) for n in idx)
    gu_shape, dn_shape = g.shape(idx[0].args[0]), g.shape(idx[1].args[0])
    i = int(dn_shape[2])
    if tuple(gu_shape) != (e, 2 * i, n_hidden) or tuple(dn_shape) != (e, n_hidden, i):
        return None
    acts = [opname(n) for n in region if opname(n) in _ACTS]
    if not acts or any(a != "silu" for a in acts):
        return None
    params = {"router": g.param(router.args[1]), "gate_up": gu, "down": dn}
    lins = [n for n in region if opname(n) == "linear" and n is not router]
    shared = 0
    if lins:
        got = _shared(g, lins, x, n_hidden)
        if got is None:
            return None
        params.update(got[0])
        shared = got[1]
    dims = dict(m=m, n=n_hidden, i=i, e=e, k=k, s=max(shared, 1))
    attrs = {"act": "silu", "norm": int(norm), "shared": int(bool(shared))}
    return Match(Kind.EXPERTS, "moe", node, [x], dims, attrs, params, nodes=region)


def _shared(g: AtenGraph, lins: list[Node], x: Node, n: int
            ) -> tuple[dict[str, str], int] | None:
    """The shared expert's parameters and width from the region's other linears."""
    by = {}
    for lin in lins:
        shape = tuple(g.shape(lin.args[1]))
        reads_x = g.root(lin.args[0]) is x
        if reads_x and shape == (1, n) and any(opname(u) == "sigmoid" for u in lin.users):
            by["s_router"] = lin
        elif reads_x and any(opname(u) == "silu" for u in g.alias_users(lin)):
            by["s_gate"] = lin
        elif reads_x:
            by["s_up"] = lin
        else:
            by["s_down"] = lin
    if set(by) != {"s_router", "s_gate", "s_up", "s_down"}:
        return None
    s = int(g.shape(by["s_gate"].args[1])[0])
    if tuple(g.shape(by["s_down"].args[1])) != (n, s):
        return None
    return {k: g.param(v.args[1]) for k, v in by.items()}, s
