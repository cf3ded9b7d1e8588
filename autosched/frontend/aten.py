"""A read-only view of an ATen graph for the pattern matcher.

Every value of the graph is an *activation* (it depends on the token ids), *static* (it
depends only on positions, buffers and constants: rotary tables, masks, cache indices),
or a *parameter*. Aliasing ops (views, transposes, dtype casts, copies, row slices) carry
a value unchanged: :meth:`AtenGraph.root` follows them back to the op that computed it.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Iterator
from dataclasses import dataclass, field

import torch

__all__ = ["ALIASES", "AtenGraph", "Placeholder", "alias_source", "opname", "replay_aliases"]

ALIASES = frozenset({
    "view", "reshape", "_unsafe_view", "transpose", "permute", "t", "unsqueeze", "squeeze",
    "expand", "clone", "contiguous", "_to_copy", "to", "alias", "detach", "detach_",
    "lift_fresh_copy", "type_as", "dropout", "_reshape_alias", "expand_as",
})
_IGNORED = frozenset({"_assert_tensor_metadata", "_assert_scalar", "sym_constrain_range_for_size",
                      "_assert_async"})


def opname(node: torch.fx.Node) -> str:
    """``linear``, ``scaled_dot_product_attention``, ``getitem``...: the op without
    namespace and overload ("" for placeholders and outputs)."""
    if node.op != "call_function":
        return ""
    if node.target is operator.getitem:
        return "getitem"
    schema = getattr(node.target, "_schema", None)
    if schema is not None:
        return schema.name.split("::")[-1]
    return getattr(node.target, "__name__", str(node.target))


@dataclass(frozen=True)
class Placeholder:
    """What a graph input is: ``ids``, ``positions``, ``param`` or ``buffer`` (with its
    fully qualified name), or ``const`` (lifted constants, other inputs)."""

    kind: str
    target: str = ""


@dataclass
class AtenGraph:
    """The graph, its placeholders' kinds, and per-value classification and users."""

    graph: torch.fx.Graph
    inputs: dict[str, Placeholder]
    active: set[torch.fx.Node] = field(default_factory=set)
    users: dict[torch.fx.Node, list[torch.fx.Node]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for n in self.graph.nodes:
            self.users[n] = [u for u in n.users if opname(u) not in _IGNORED]
            if n.op == "placeholder":
                if self.inputs.get(n.name, Placeholder("const")).kind == "ids":
                    self.active.add(n)
            elif any(a in self.active for a in n.all_input_nodes):
                self.active.add(n)

    def nodes(self) -> Iterator[torch.fx.Node]:
        """The call_function nodes that compute something, in graph order."""
        for n in self.graph.nodes:
            if n.op == "call_function" and opname(n) not in _IGNORED:
                yield n

    def placeholder(self, node: torch.fx.Node) -> Placeholder | None:
        return self.inputs.get(node.name) if node.op == "placeholder" else None

    def is_alias(self, node: torch.fx.Node) -> bool:
        """Whether ``node`` carries its first input's value (rows sliced at most; a
        feature slice keeping every column; a ``cat`` with empty tensors)."""
        name = opname(node)
        if name in ALIASES:
            return isinstance(node.args[0], torch.fx.Node)
        if name == "slice":  # a slice of rows (not of the feature dimension)
            x = node.args[0]
            if not isinstance(x, torch.fx.Node):
                return False
            shape = tuple(x.meta["val"].shape)
            if shape == tuple(node.meta["val"].shape):
                return True  # every element kept
            dim = (node.args[1] if len(node.args) > 1 else 0) % len(shape)
            root = self.root(x)  # whole rows of the producer's [rows, width] output
            width = int(root.meta["val"].shape[-1]) if isinstance(root, torch.fx.Node) else 1
            return dim != len(shape) - 1 and math.prod(shape[dim + 1:]) % width == 0
        if name == "cat":
            return _sole(node) is not None
        return False

    def root(self, node: object) -> object:
        """``node`` with aliasing ops followed back (non-nodes returned as they are)."""
        while isinstance(node, torch.fx.Node) and self.is_alias(node):
            node = alias_source(node)
        return node

    def param(self, node: object) -> str | None:
        """The parameter a value is (through aliases), else None."""
        r = self.root(node)
        ph = self.placeholder(r) if isinstance(r, torch.fx.Node) else None
        return ph.target if ph is not None and ph.kind == "param" else None

    def transposed_param(self, node: object) -> str | None:
        """The parameter ``W`` of a value ``W.t()`` (the second operand of ``mm``)."""
        if isinstance(node, torch.fx.Node) and opname(node) in ("t", "permute", "transpose",
                                                                   "numpy_T"):
            shape = node.meta["val"].shape
            src = node.args[0]
            if len(shape) == 2 and isinstance(src, torch.fx.Node) and \
                    tuple(src.meta["val"].shape) == (shape[1], shape[0]):
                return self.param(src)
        return None

    def is_static(self, node: object) -> bool:
        return isinstance(node, torch.fx.Node) and node not in self.active

    def chain(self, node: torch.fx.Node) -> list[torch.fx.Node]:
        """The aliasing ops from ``node``'s root (exclusive) to ``node`` (inclusive)."""
        out = []
        while self.is_alias(node):
            out.append(node)
            node = alias_source(node)
        return out[::-1]

    def alias_users(self, node: torch.fx.Node) -> list[torch.fx.Node]:
        """Users of ``node``, looking through aliasing ops to the ops that compute."""
        out: list[torch.fx.Node] = []
        for u in self.users[node]:
            if self.is_alias(u):
                out.extend(x for x in self.alias_users(u) if x not in out)
            elif u not in out:
                out.append(u)
        return out

    @staticmethod
    def shape(node: torch.fx.Node) -> tuple[int, ...]:
        return tuple(int(s) for s in node.meta["val"].shape)

    @staticmethod
    def dtype(node: torch.fx.Node) -> torch.dtype:
        return node.meta["val"].dtype


_CASTS = ("to", "_to_copy", "type_as")


def _sole(node: torch.fx.Node) -> torch.fx.Node | None:
    """The one non-empty input of a ``cat`` (the others hold no element), else None."""
    parts = node.args[0] if isinstance(node.args[0], list | tuple) else ()
    full = [p for p in parts if not isinstance(p, torch.fx.Node) or p.meta["val"].numel()]
    return full[0] if len(full) == 1 and isinstance(full[0], torch.fx.Node) else None


def alias_source(node: torch.fx.Node) -> torch.fx.Node:
    """The input whose value the aliasing op ``node`` carries."""
    return _sole(node) if opname(node) == "cat" else node.args[0]


def replay_aliases(chain: list[torch.fx.Node], value: torch.Tensor) -> torch.Tensor:
    """``value`` (of the chain's root) through the aliasing ops of ``chain``; dtype casts
    are skipped, values keep their dtype."""
    for a in chain:
        if opname(a) not in (*_CASTS, "cat"):
            value = a.target(value, *a.args[1:], **a.kwargs)
    return value
