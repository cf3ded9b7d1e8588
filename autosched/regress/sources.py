"""Where the schedules of a tuned case come from: one small read-only interface.

The suite's tuned cases read the checked-in export (:class:`~.tuned.TunedExport`), so
their figures never depend on a search; ``autosched kernels`` may read a tuning database
instead (:class:`DatabaseSchedules`: exact, nearest or default, as ``compile`` looks up).
"""

from __future__ import annotations

import abc

from autosched.compiler import pin_graph
from autosched.database import Database
from autosched.ir import OpGraph
from autosched.lookup import LookupResult, lookup
from sim.hardware import Hardware

__all__ = ["DatabaseSchedules", "ScheduleSource"]


class ScheduleSource(abc.ABC):
    """Answers which schedule each operator of a model step compiles with.

    Read-only: a source never measures or writes. ``choices`` is deterministic for a given
    source state, and raises an ``AutoschedError`` naming what it cannot answer.
    """

    @abc.abstractmethod
    def choices(self, graph: OpGraph, hw: Hardware) -> dict[str, LookupResult]:
        """Node name -> its schedule and how it was found (``LookupResult.kind``)."""

    def pinned(self, graph: OpGraph, hw: Hardware) -> OpGraph:
        """``graph`` as the compiler compiles it with this source's schedules: every
        workload of several rows reading its weights where the one-row step keeps them
        (``compile_step`` pins so; ``choices`` of the result are the schedules that
        compile). Here with no database: where each one-row default keeps them."""
        return pin_graph(graph, hw, None)


class DatabaseSchedules(ScheduleSource):
    """A tuning database, looked up as the compiler does (exact, nearest, default); None:
    no database, every operator on its family's default."""

    def __init__(self, db: Database | None) -> None:
        self.db = db

    def choices(self, graph: OpGraph, hw: Hardware) -> dict[str, LookupResult]:
        found: dict[str, LookupResult] = {}
        for n in graph:
            if n.workload.key not in found:
                found[n.workload.key] = lookup(self.db, n.workload, hw)
        return {n.name: found[n.workload.key] for n in graph}

    def pinned(self, graph: OpGraph, hw: Hardware) -> OpGraph:
        """Where the database's one-row schedules keep the weights."""
        return pin_graph(graph, hw, self.db)
