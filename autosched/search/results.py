"""What a search reports: per-task results at the end, progress after every batch."""

from __future__ import annotations

import math
from dataclasses import dataclass

from autosched.measure.record import Measurement
from search_spaces import Workload

__all__ = ["Progress", "TaskResult"]


@dataclass(frozen=True)
class TaskResult:
    """What tuning one task gave: default and best measurements, how many were measured.

    ``measurements`` counts every distinct schedule measured for the task, earlier runs on
    the same database included; ``new`` only those of this run. ``history`` is the best
    latency so far after each measurement (``inf`` until the first success).
    """

    workload: Workload
    count: int
    default: Measurement | None
    best: Measurement | None
    measurements: int
    history: tuple[float, ...]
    new: int = 0
    predicted_gain_ns: float = math.nan  # per step, when the search stopped; nan: no model
    search_s: float = 0.0  # wall seconds the search spent on the task (propose, rank, fit)
    measure_s: float = 0.0  # its share of the wall seconds spent waiting for measurements

    @property
    def speedup(self) -> float:
        """Default latency over best latency (nan when either is missing)."""
        if self.default is None or self.best is None or not self.default.ok:
            return math.nan
        return self.default.latency_ns / self.best.latency_ns


@dataclass(frozen=True)
class Progress:
    """Reported after every measured batch: which task, the budget, the new records."""

    task: int
    workload: Workload
    used: int
    budget: int
    best_ns: float
    new: tuple[Measurement, ...]
