"""What a recogniser returns, and the small ATen helpers every recogniser shares.

Recognisers live with their families (``Family.recognisers``); each is anchored at the op
that produces the family's result and returns a :class:`Match` or None. A match names
its workload op (the family that claims it) and its structural :class:`Kind`, which is
all the rest of the frontend (roles, capture, the ``torch.compile`` backend) reasons
about: it never names a family.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field
from typing import Any

import torch

from .aten import AtenGraph, opname

__all__ = ["Kind", "Match", "affine_tail", "args", "mean_last", "numel", "param_value", "rows",
           "scalar", "square_of"]

Node = torch.fx.Node


class Kind(enum.Enum):
    """The part an operator plays in a decoder, as roles and capture see it."""

    LINEAR = enum.auto()  # a matrix of parameters times activations
    NORM = enum.auto()  # a normalisation over the last dim
    ATTENTION = enum.auto()  # attention over a cache of keys and values
    ROTARY = enum.auto()  # a rotary position embedding
    POINTWISE = enum.auto()  # an element-wise op (attr ``fn``: add, mul, an activation)
    LOOKUP = enum.auto()  # rows of a table by token id
    SELECT = enum.auto()  # the next token from the logits
    EXPERTS = enum.auto()  # a routed mixture of experts (router, experts, weighted sum)
    OP = enum.auto()  # an op of the model no family covers (attr ``fn``)


@dataclass
class Match:
    """One operator found in the graph: its structural kind, the workload op of the family
    claiming it, the node computing the result, the activation inputs in the kernel's
    operand order, dims, attrs, the parameters it reads by local name, and every
    activation node it claims."""

    kind: Kind
    op: str
    out: Node
    ins: list[Node]
    dims: dict[str, int]
    attrs: dict[str, Any] = field(default_factory=dict)
    params: dict[str, str] = field(default_factory=dict)
    nodes: set[Node] = field(default_factory=set)
    extra: dict[str, Any] = field(default_factory=dict)


def args(node: Node, *names: str) -> list[Any]:
    """Positional-or-keyword arguments of ``node`` by name (None when absent)."""
    schema = getattr(node.target, "_schema", None)
    order = [a.name for a in schema.arguments] if schema is not None else []
    out = []
    for i, name in enumerate(names):
        j = order.index(name) if name in order else i
        out.append(node.args[j] if j < len(node.args) else node.kwargs.get(name))
    return out


def numel(node: Node) -> int:
    return math.prod(AtenGraph.shape(node))


def rows(node: Node) -> tuple[int, int]:
    """(rows, width) of ``node`` seen as a matrix over its last dim."""
    shape = AtenGraph.shape(node)
    n = shape[-1] if shape else 1
    return max(math.prod(shape) // max(n, 1), 1), n


def scalar(x: Any) -> float | None:
    return float(x) if isinstance(x, int | float) and not isinstance(x, bool) else None


def mean_last(g: AtenGraph, node: object) -> Node | None:
    """The argument of ``mean(arg, -1, keepdim=True)``, else None."""
    node = g.root(node)
    if not isinstance(node, Node) or opname(node) != "mean":
        return None
    dims = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim")
    x = node.args[0]
    rank = len(g.shape(x))
    ok = dims is not None and [d % rank for d in dims] == [rank - 1]
    return x if ok else None


def square_of(g: AtenGraph, node: object) -> Node | None:
    """``x`` when ``node`` is ``x**2``, ``x*x`` or ``square(x)``."""
    node = g.root(node)
    if not isinstance(node, Node):
        return None
    if opname(node) == "pow" and node.args[1] == 2:
        return g.root(node.args[0])
    if opname(node) == "mul" and g.root(node.args[0]) is g.root(node.args[1]):
        return g.root(node.args[0])
    if opname(node) == "square":
        return g.root(node.args[0])
    return None


def param_value(g: AtenGraph, x: object) -> str | None:
    """The parameter a value is, or one computed from a parameter and a number (``1 + w``:
    Gemma's norm scale; ``w * c``) as a derived name (:mod:`autosched.ir.derived`), else None."""
    p = g.param(x)
    if p is not None:
        return p
    r = g.root(x)
    if not isinstance(r, Node) or r in g.active or opname(r) not in ("add", "mul") or \
            len(r.args) < 2 or r.kwargs.get("alpha", 1) != 1:
        return None
    from autosched.ir.derived import derived

    for a, c in ((r.args[0], r.args[1]), (r.args[1], r.args[0])):
        q, v = g.param(a) if isinstance(a, Node) else None, scalar(c)
        if q is not None and v is not None:
            return derived(q, offset=v) if opname(r) == "add" else derived(q, scale=v)
    return None


def affine_tail(g: AtenGraph, node: Node, claimed: set[Node]) -> tuple[Node, dict[str, str]]:
    """Follow ``node`` through ``* weight`` and ``+ bias`` parameter ops (sole users); a
    weight may be computed from a parameter (:func:`param_value`)."""
    params: dict[str, str] = {}
    for local, op in (("w", "mul"), ("b", "add")):
        users = g.alias_users(node)
        if len(users) != 1 or opname(users[0]) != op:
            break
        u = users[0]
        other = [a for a in u.args[:2] if g.root(a) is not node]
        if len(other) != 1 or param_value(g, other[0]) is None:
            break
        params[local] = param_value(g, other[0])
        claimed.add(u)
        node = u
    return node, params
