"""ATen graph -> operator matches: every recogniser claims its nodes, the two rotary
halves of an attention merge into one ``rope`` operator, cache writes join their
attention, and every activation op left over runs on the host (:mod:`.fallback`)."""

from __future__ import annotations

import torch

from .aten import AtenGraph, opname
from .config import ModelError
from .fallback import host_match
from .patterns import RECOGNISERS, Match, new_values

__all__ = ["find_matches"]

Node = torch.fx.Node


def _closed(g: AtenGraph, m: Match) -> bool:
    """No value inside the match but its result is read outside it (cache writes may be:
    the graph returns the updated cache to its caller)."""
    inner = m.nodes - {m.out} - m.extra.get("writes", set())
    return all(u in m.nodes for n in inner for u in g.alias_users(n))


def _claim_writes(g: AtenGraph, node: Node, attn: list[Match]) -> bool:
    """A leftover write of new keys or values into a cache joins its attention."""
    seen: set[Node] = set()
    vals = new_values(g, node, seen)
    if vals == [node]:  # not a write: the value itself
        return False
    for a in attn:
        if vals and all(v in a.ins[1:] for v in vals):
            a.nodes |= seen | {node}
            return True
    return False


def _merge_ropes(g: AtenGraph, matches: list[Match], order: dict[Node, int]) -> list[Match]:
    """One ``rope`` operator per attention from its q and k rotations (same tables)."""
    by_out = {m.out: m for m in matches}
    drop: set[int] = set()
    for a in (m for m in matches if m.family == "attention"):
        rq, rk = by_out.get(a.ins[0]), by_out.get(a.ins[1])
        if rq is None or rk is None or rq.family != "rope" or rk.family != "rope" or \
                g.root(rq.extra["cos"]) is not g.root(rk.extra["cos"]):
            continue
        rows = a.dims["b"] * a.dims["q"]
        d = rq.dims["d"]
        heads = rq.dims["h"] + rk.dims["h"]
        later = max(rq, rk, key=lambda m: order[m.out])
        merged = Match("rope", later.out, [rq.ins[0], rk.ins[0]], dict(m=rows, h=heads, d=d),
                       nodes=rq.nodes | rk.nodes,
                       extra={**rq.extra, "q_out": rq.out, "k_out": rk.out,
                              "q_x": rq.extra["x"], "k_x": rk.extra["x"]})
        drop |= {id(rq), id(rk)}
        matches.append(merged)
        a.extra["rope"] = merged
    out = [m for m in matches if id(m) not in drop]
    out.sort(key=lambda m: order[m.out])
    return out


def _empty(node: Node) -> bool:
    """A tensor without elements (the pass-through half of a full rotary): nothing to run."""
    val = node.meta.get("val")
    return isinstance(val, torch.Tensor) and val.numel() == 0


def _several(node: Node) -> bool:
    """An op of several outputs (``split``, ``chunk``): each output read runs it."""
    return isinstance(node.meta.get("val"), list | tuple)


def find_matches(g: AtenGraph) -> list[Match]:
    """Every operator of ``g`` in graph order (see the module docstring)."""
    nodes = list(g.nodes())
    claimed: set[Node] = set()
    matches: list[Match] = []
    for rec in RECOGNISERS:
        for node in reversed(nodes):
            if node in claimed or node not in g.active or g.is_alias(node):
                continue
            m = rec(g, node)
            if m is not None and not (m.nodes & claimed) and _closed(g, m):
                claimed |= m.nodes
                matches.append(m)
    attn = [m for m in matches if m.family == "attention"]
    for node in nodes:
        if node in claimed or node not in g.active or g.is_alias(node) or not g.users[node] \
                and opname(node) == "getitem" or _empty(node) or _several(node):
            continue
        if _claim_writes(g, node, attn):
            claimed.add(node)
            continue
        matches.append(host_match(g, node))
        claimed.add(node)
    if not any(m.family != "extern" for m in matches):
        raise ModelError("no operator of the model was recognised; is it a decoder?")
    return _merge_ropes(g, matches, {n: i for i, n in enumerate(g.graph.nodes)})
