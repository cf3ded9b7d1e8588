"""Tasks: the unique workloads of one or more operator graphs, with how often each occurs."""

from __future__ import annotations

from dataclasses import dataclass

from search_spaces.workload import Workload

from .graph import OpGraph

__all__ = ["Task", "tasks"]


@dataclass(frozen=True)
class Task:
    """One workload to tune, ``count`` occurrences per step, the roles it plays there."""

    workload: Workload
    count: int
    roles: tuple[str, ...]

    @property
    def key(self) -> str:
        """The workload's stable key (``Workload.key``)."""
        return self.workload.key

    def to_dict(self) -> dict:
        return {"workload": self.workload.to_dict(), "count": self.count,
                "roles": list(self.roles)}

    @classmethod
    def from_dict(cls, d: dict) -> Task:
        return cls(Workload.from_dict(d["workload"]), int(d["count"]), tuple(d["roles"]))


def tasks(*graphs: OpGraph) -> list[Task]:
    """The unique workloads of ``graphs`` (alternative graphs of one step, e.g. one per
    fusion plan), by workload key in order of first occurrence: the one rule.

    A workload's count is its number of nodes in a graph, and over several graphs the
    largest such number (only one graph runs), so one graph's counts sum to its length.
    Roles are listed in order of first appearance. Equal inputs give equal task lists.
    """
    counts: dict[str, int] = {}
    roles: dict[str, list[str]] = {}
    first: dict[str, Workload] = {}
    for graph in graphs:
        here: dict[str, int] = {}
        for n in graph.nodes:
            k = n.workload.key
            if k not in first:
                first[k], counts[k], roles[k] = n.workload, 0, []
            here[k] = here.get(k, 0) + 1
            if n.role not in roles[k]:
                roles[k].append(n.role)
        for k, c in here.items():
            counts[k] = max(counts[k], c)
    return [Task(first[k], counts[k], tuple(roles[k])) for k in first]
