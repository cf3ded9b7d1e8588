"""The tuning report: what ``autosched tune`` measured and what it bought, as JSON and tables.

A :class:`TuneReport` is a frozen record built once at the end of the pipeline. Latencies
are nanoseconds; a latency that does not exist (a task whose every measurement failed) is
``inf`` in Python and ``null`` in JSON.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from search_spaces import Schedule, Workload

__all__ = ["EndToEnd", "TaskReport", "TuneReport"]


def _num(v: float) -> float | None:
    """JSON-safe float: non-finite values become null."""
    return float(v) if math.isfinite(v) else None


@dataclass(frozen=True)
class TaskReport:
    """One tuned workload: its default, tuned and bound latency and the schedule chosen."""

    workload: Workload
    count: int
    default_ns: float
    tuned_ns: float
    bound_ns: float
    measurements: int
    schedule: Schedule | None
    roles: tuple[str, ...] = ()
    new: int = 0  # measurements this run spent on the task
    predicted_gain_ns: float = math.nan  # per step still predicted when the run stopped

    @property
    def realised_gain_ns(self) -> float:
        """What tuning saved per step: count x (default - tuned) (nan when missing)."""
        if not (math.isfinite(self.default_ns) and math.isfinite(self.tuned_ns)):
            return math.nan
        return self.count * (self.default_ns - self.tuned_ns)

    @property
    def speedup(self) -> float:
        """default / tuned (nan when either is missing)."""
        if not (math.isfinite(self.default_ns) and math.isfinite(self.tuned_ns)):
            return math.nan
        return self.default_ns / self.tuned_ns if self.tuned_ns > 0 else math.nan

    def to_dict(self) -> dict:
        return {
            "workload": self.workload.key, "op": self.workload.op,
            "shape": self.workload.dims, "dtype": self.workload.dtype,
            "attrs": dict(self.workload.attrs), "roles": list(self.roles), "count": self.count,
            "default_ns": _num(self.default_ns), "tuned_ns": _num(self.tuned_ns),
            "bound_ns": _num(self.bound_ns), "speedup": _num(self.speedup),
            "measurements": self.measurements, "new": self.new,
            "predicted_gain_ns": _num(self.predicted_gain_ns),
            "realised_gain_ns": _num(self.realised_gain_ns),
            "schedule": self.schedule.to_dict() if self.schedule else None,
        }


@dataclass(frozen=True)
class EndToEnd:
    """Whole-step figures: default schedules unfused vs the step stored (``plan``,
    ``placement`` and ``schedules``: ``tuned`` or ``default``), never slower than it."""

    default_ns: float
    tuned_ns: float
    bound_ns: float
    baseline_ns: float
    tokens_per_s: float
    energy_pj: float
    plan: dict | None = None
    placement: str = "auto"
    schedules: str = "tuned"  # where the winning step's schedules come from (or "default")

    @property
    def speedup(self) -> float:
        return self.default_ns / self.tuned_ns if self.tuned_ns > 0 else math.nan

    def to_dict(self) -> dict:
        return {"default_ns": _num(self.default_ns), "tuned_ns": _num(self.tuned_ns),
                "bound_ns": _num(self.bound_ns), "baseline_ns": _num(self.baseline_ns),
                "tokens_per_s": _num(self.tokens_per_s), "energy_pj": _num(self.energy_pj),
                "speedup": _num(self.speedup), "plan": self.plan, "placement": self.placement,
                "schedules": self.schedules}


@dataclass(frozen=True)
class TuneReport:
    """Everything one ``tune`` run did: settings, per-task results, end-to-end figures.

    ``measurements`` counts the simulations this run added to the database; ``reused``
    counts the records of these tasks already there when it started (never re-measured).
    ``plans`` lists every fusion plan compared, best estimate first, as (plan, simulated
    tuned step ns or nan when it was not a finalist, estimate ns: the sum over its tasks
    of count x best latency). ``search_s`` is the wall time the search itself spent
    (proposing, lowering, featurising, fitting, ranking), ``measure_s`` the time waiting
    for measurements.
    """

    model: str
    hardware: str
    hardware_fingerprint: str
    phase: str
    batch: int
    context: int
    trials: int
    seed: int
    sampler: str
    cost_model: str
    fusion: str
    measurements: int
    reused: int
    wall_s: float
    tasks: tuple[TaskReport, ...]
    end_to_end: EndToEnd
    plans: tuple[tuple[dict | None, float, float], ...] = field(default=())
    search_s: float = math.nan
    measure_s: float = math.nan

    def to_dict(self) -> dict:
        return {
            "model": self.model, "hardware": self.hardware,
            "hardware_fingerprint": self.hardware_fingerprint, "phase": self.phase,
            "batch": self.batch, "context": self.context, "trials": self.trials,
            "seed": self.seed, "sampler": self.sampler, "cost_model": self.cost_model,
            "fusion": self.fusion, "measurements": self.measurements, "reused": self.reused,
            "wall_s": self.wall_s, "search_s": _num(self.search_s),
            "measure_s": _num(self.measure_s), "tasks": [t.to_dict() for t in self.tasks],
            "end_to_end": self.end_to_end.to_dict(),
            "plans": [{"plan": p, "tuned_ns": _num(ns), "estimate_ns": _num(est)}
                      for p, ns, est in self.plans],
        }

    def write(self, path: str | Path) -> None:
        """Write the report as indented JSON to ``path`` (atomically, :mod:`sim.writes`)."""
        from sim.writes import write_atomic

        write_atomic(Path(path), json.dumps(self.to_dict(), indent=2) + "\n", what="report")

    def task_rows(self) -> list[list[object]]:
        """Rows for the per-task table, heaviest total tuned time first."""
        def weight(t: TaskReport) -> float:
            return -t.count * (t.tuned_ns if math.isfinite(t.tuned_ns) else 0.0)
        rows: list[list[object]] = []
        for t in sorted(self.tasks, key=weight):
            rows.append([t.workload.key, t.count, t.default_ns, t.tuned_ns, t.bound_ns,
                         t.speedup, t.measurements, t.new, t.predicted_gain_ns,
                         t.realised_gain_ns])
        return rows

    def plan_margin(self) -> float:
        """The runner-up finalist's simulated step over the winner's (nan with one)."""
        sims = sorted(ns for _, ns, _ in self.plans if math.isfinite(ns))
        return sims[1] / sims[0] if len(sims) > 1 and sims[0] > 0 else math.nan

    def end_to_end_pairs(self) -> list[tuple[str, object]]:
        """(label, value) pairs for the end-to-end summary."""
        e = self.end_to_end
        return [("default ns", e.default_ns), ("tuned ns", e.tuned_ns),
                ("bound ns", e.bound_ns), ("baseline ns (plain memory)", e.baseline_ns),
                ("speedup vs default", e.speedup), ("tuned / bound", e.tuned_ns / e.bound_ns
                                                   if e.bound_ns > 0 else math.nan),
                ("tokens/s", e.tokens_per_s), ("energy pJ", e.energy_pj),
                ("fusion plan", _plan_text(e.plan)), ("placement", e.placement),
                ("schedules", e.schedules),
                ("plan margin (runner-up / winner)", self.plan_margin()),
                ("measurements (new / reused)", f"{self.measurements} / {self.reused}"),
                ("search s / measuring s", f"{self.search_s:.1f} / {self.measure_s:.1f}"),
                ("wall s", self.wall_s)]


TASK_HEADERS = ("workload", "count", "default ns", "tuned ns", "bound ns", "speedup",
                "measurements", "new", "pred. gain ns", "realised gain ns")


def _plan_text(plan: dict | None) -> str:
    if not plan:
        return "none"
    on = [k for k, v in sorted(plan.items()) if v]
    return ",".join(on) if on else "none"
