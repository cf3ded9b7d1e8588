"""What the backend did: per compiled graph, its operators, the ops it ran on the host,
why it ran eagerly (if it did), and every call's simulated latency."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

__all__ = ["CallRecord", "GraphReport", "clear_reports", "reports"]


@dataclass(frozen=True)
class CallRecord:
    """One call: tokens per sequence, positions after it, cycle-level latency of its
    program in ns (nan when it ran eagerly, ``eager`` saying why)."""

    tokens: int
    context: int
    latency_ns: float
    eager: str = ""


@dataclass
class GraphReport:
    """One graph Dynamo handed the backend (mutable: calls are appended as they run)."""

    name: str
    hardware: str
    operators: int = 0
    host_ops: tuple[str, ...] = ()  # ATen ops no operator family covers, run on the host
    eager: str = ""  # why the whole graph runs eagerly ("" when it does not)
    lookups: dict = field(default_factory=dict)
    calls: list[CallRecord] = field(default_factory=list)

    @property
    def latencies_ns(self) -> list[float]:
        return [c.latency_ns for c in self.calls if not math.isnan(c.latency_ns)]

    def to_dict(self) -> dict:
        d = asdict(self)
        d["calls"] = [asdict(c) for c in self.calls]
        return d


_REPORTS: list[GraphReport] = []


def reports() -> list[GraphReport]:
    """Every graph compiled in this process, oldest first (read after the run)."""
    return list(_REPORTS)


def clear_reports() -> None:
    _REPORTS.clear()


def new_report(name: str, hardware: str) -> GraphReport:
    r = GraphReport(name, hardware)
    _REPORTS.append(r)
    return r
