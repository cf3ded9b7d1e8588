"""Tasks: the unique workloads of an operator graph, with how often each occurs."""

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


def tasks(graph: OpGraph) -> list[Task]:
    """Deduplicate ``graph`` by workload key, in order of first occurrence.

    Counts sum to ``len(graph)``; roles are listed in order of first appearance. Equal
    graphs give equal task lists.
    """
    counts: dict[str, int] = {}
    roles: dict[str, list[str]] = {}
    first: dict[str, Workload] = {}
    for n in graph.nodes:
        k = n.workload.key
        if k not in first:
            first[k], counts[k], roles[k] = n.workload, 0, []
        counts[k] += 1
        if n.role not in roles[k]:
            roles[k].append(n.role)
    return [Task(first[k], counts[k], tuple(roles[k])) for k in first]
