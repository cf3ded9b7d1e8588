"""ATen graph -> operator matches: every family's recognisers claim their nodes (in their
order; a recogniser may return several matches claimed together), an op left over joins
the family that absorbs it (a cache write its attention)
or runs on the host as the model computes it (the family that claims leftovers), and
each family makes its last pass (the two rotary halves of an attention merge)."""

from __future__ import annotations

import torch

from autosched.families import families

from .aten import AtenGraph, opname
from .config import ModelError
from .match import Kind, Match

__all__ = ["find_matches", "recognisers"]

Node = torch.fx.Node


def recognisers() -> list:
    """Every family's recognisers, in the order they run (ties: registry order)."""
    pairs = [(order, i, rec) for i, fam in enumerate(families())
             for order, rec in fam.recognisers()]
    return [rec for _, _, rec in sorted(pairs, key=lambda t: (t[0], t[1]))]


def _closed(g: AtenGraph, ms: list[Match]) -> bool:
    """No value inside the matches but their results is read outside them (cache writes
    may be: the graph returns the updated cache to its caller)."""
    nodes = set().union(*(m.nodes for m in ms))
    inner = nodes - {m.out for m in ms} - set().union(*(m.extra.get("writes", set())
                                                        for m in ms))
    return all(u in nodes for n in inner for u in g.alias_users(n))


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
    for rec in recognisers():
        for node in reversed(nodes):
            if node in claimed or node not in g.active or g.is_alias(node):
                continue
            found = rec(g, node)  # a match, or several claimed together (a packed linear)
            ms = found if isinstance(found, list) else [found] if found is not None else []
            mine = set().union(*(m.nodes for m in ms))
            if ms and not (mine & claimed) and _closed(g, ms):
                claimed |= mine
                matches.extend(ms)
    fams = families()
    rest = next(f for f in fams if f.claims_leftovers)
    for node in nodes:
        if node in claimed or node not in g.active or g.is_alias(node) or not g.users[node] \
                and opname(node) == "getitem" or _empty(node) or _several(node):
            continue
        if not any(f.absorbs(g, node, matches) for f in fams):
            matches.append(rest.leftover(g, node))
        claimed.add(node)
    if all(m.kind is Kind.OP for m in matches):
        raise ModelError("no operator of the model was recognised; is it a decoder?")
    for f in fams:
        matches = f.finish(g, matches)
    order = {n: i for i, n in enumerate(g.graph.nodes)}
    return sorted(matches, key=lambda m: order[m.out])
