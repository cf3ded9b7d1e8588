"""A compiled pipeline stage: the program every device of one stage runs, and its parts.

A one-device step is one stage. The stage's graph is the whole step's share graph;
``choices`` and ``kernels`` hold this stage's own nodes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from autosched.codegen import Linked
from autosched.codegen.memplan import MemoryPlan
from autosched.ir import OpGraph
from autosched.lookup import LookupResult
from sim.hardware import Hardware
from sim.kernels import Kernel
from sim.program import Program

__all__ = ["CompiledStage"]


@dataclass
class CompiledStage:
    """The linked program of one stage and where its results are read."""

    graph: OpGraph
    hw: Hardware
    linked: Linked
    choices: dict[str, LookupResult]
    kernels: dict[str, Kernel]
    logits: str  # buffer holding the logits ("" when the stage computes none)
    token: str  # buffer holding the next token ("" when none is computed here)
    placement: str = "auto"
    waits: tuple[str, ...] = ()  # tokens of earlier stages' sends, waited for first
    rows: int = field(init=False)

    def __post_init__(self) -> None:
        self.rows = self.graph.batch * self.graph.tokens

    @property
    def program(self) -> Program:
        return self.linked.program

    @property
    def budget(self) -> MemoryPlan:
        """The device's memory plan (:class:`~autosched.codegen.memplan.MemoryPlan`)."""
        return self.linked.budget

    @property
    def nodes(self) -> list:
        """This stage's own nodes, in graph order."""
        return [n for n in self.graph if n.name in self.choices]

    def lookup_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for r in self.choices.values():
            counts[str(r.kind)] = counts.get(str(r.kind), 0) + 1
        return counts
