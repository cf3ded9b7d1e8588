"""The graph a fusion plan rewrites, node by node: the nodes, which originals each fused
node stands for (so the weights can follow), and the edits the rules share."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from autosched.ir import OpNode
from search_spaces import Workload

__all__ = ["LINEAR", "FusionState", "rows_of", "with_attrs"]

LINEAR = ("gemv", "gemm")


def rows_of(w: Workload) -> int:
    """Rows of ``w``'s output (its family says)."""
    from ..registry import family_of

    return family_of(w).rows(w)


@dataclass
class FusionState:
    """The nodes being rewritten and what the weights need to follow them."""

    nodes: list[OpNode]
    origin: dict[str, tuple[str, ...]]  # linear node -> original nodes whose W it stacks
    norm: dict[str, str]  # node with a prologue -> the norm node it absorbed
    out_norm: dict[str, str] = dataclasses.field(default_factory=dict)  # same, epilogue
    scale: dict[str, float] = dataclasses.field(default_factory=dict)  # linear -> its W scale
    post_norm: dict[str, str] = dataclasses.field(default_factory=dict)  # its post-norm

    def consumers(self, name: str) -> list[OpNode]:
        return [n for n in self.nodes if name in n.inputs]

    def rewire(self, mapping: dict[str, str]) -> None:
        out = []
        for n in self.nodes:
            ins: list[str] = []
            for i in n.inputs:
                j = mapping.get(i, i)
                if j == i or j not in ins:
                    ins.append(j)
            out.append(dataclasses.replace(n, inputs=tuple(ins)))
        self.nodes = out

    def swap(self, old: OpNode, new: OpNode | None) -> None:
        i = self.nodes.index(old)
        self.nodes[i:i + 1] = [] if new is None else [new]


def with_attrs(w: Workload, inputs_dims: dict | None = None, **attrs: object) -> Workload:
    """``w`` with ``attrs`` added and ``inputs_dims`` changed."""
    return Workload.make(w.op, w.dtype, {**dict(w.attrs), **attrs} or None,
                         **{**w.dims, **(inputs_dims or {})})
