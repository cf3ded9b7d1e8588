"""The operator graph: workloads in topological order with their data dependencies."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass

from search_spaces.workload import Workload

from .errors import ModelError

__all__ = ["PHASES", "OpGraph", "OpNode"]

PHASES = ("decode", "prefill")


@dataclass(frozen=True)
class OpNode:
    """One operator: its workload, the nodes it reads, its decoder layer (None outside the
    layers), its role in the model (``q_proj``, ``attn``, ``ffn_down``, ``lm_head``...) and
    where its numbers come from: ``params`` maps each kernel tensor (``W``, ``b``, ``w``,
    ``table``, ``p0``...) to the module's parameter name, and ``rotary`` to the module
    computing the rotary tables."""

    name: str
    workload: Workload
    inputs: tuple[str, ...] = ()
    layer: int | None = None
    role: str = ""
    params: tuple[tuple[str, str], ...] = ()

    def param(self, local: str) -> str | None:
        return dict(self.params).get(local)

    def to_dict(self) -> dict:
        return {"name": self.name, "workload": self.workload.to_dict(),
                "inputs": list(self.inputs), "layer": self.layer, "role": self.role,
                "params": dict(self.params)}

    @classmethod
    def from_dict(cls, d: dict) -> OpNode:
        return cls(d["name"], Workload.from_dict(d["workload"]), tuple(d.get("inputs", ())),
                   d.get("layer"), d.get("role", ""),
                   tuple(sorted((d.get("params") or {}).items())))


@dataclass(frozen=True)
class OpGraph:
    """Immutable operator graph of one inference step of ``model``.

    ``phase`` is decode (``tokens`` new tokens per sequence over a KV context of ``context``
    positions, new ones included) or prefill (``tokens`` prompt tokens, ``context`` equal to
    it). Nodes are in topological order; every input names an earlier node.
    """

    nodes: tuple[OpNode, ...]
    phase: str
    model: str = ""
    batch: int = 1
    tokens: int = 1
    context: int = 1

    def __post_init__(self) -> None:
        if self.phase not in PHASES:
            raise ModelError(f"phase {self.phase!r} is not one of {', '.join(PHASES)}")
        seen: set[str] = set()
        for n in self.nodes:
            if n.name in seen:
                raise ModelError(f"operator graph has two nodes named {n.name!r}")
            missing = [i for i in n.inputs if i not in seen]
            if missing:
                raise ModelError(f"node {n.name!r} reads {missing} which are not earlier nodes; "
                                 "nodes must be in topological order")
            seen.add(n.name)

    def __iter__(self) -> Iterator[OpNode]:
        return iter(self.nodes)

    def __len__(self) -> int:
        return len(self.nodes)

    def node(self, name: str) -> OpNode:
        for n in self.nodes:
            if n.name == name:
                return n
        raise ModelError(f"no node named {name!r} in the operator graph of {self.model!r}")

    def by_role(self, role: str) -> list[OpNode]:
        """Nodes with ``role``, in graph order."""
        return [n for n in self.nodes if n.role == role]

    def to_dict(self) -> dict:
        return {"model": self.model, "phase": self.phase, "batch": self.batch,
                "tokens": self.tokens, "context": self.context,
                "nodes": [n.to_dict() for n in self.nodes]}

    @classmethod
    def from_dict(cls, d: dict) -> OpGraph:
        return cls(tuple(OpNode.from_dict(n) for n in d["nodes"]), d["phase"],
                   d.get("model", ""), d.get("batch", 1), d.get("tokens", 1),
                   d.get("context", 1))

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_json(cls, s: str) -> OpGraph:
        return cls.from_dict(json.loads(s))
