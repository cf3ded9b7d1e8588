"""The checked-in baseline of a suite: every case's figures, and why any may move.

``data/baseline-<suite>.json`` holds the figures of every case (:class:`CaseResult`
dicts), the suite version they were taken at, a log of updates (when, at which commit,
the reason given, the cases that changed), and ``expected``: hand-written entries that
let a figure move within a relative tolerance, each with its reason. Without such an
entry the tolerance on simulated figures is zero.

An ``expected`` entry: ``{"case": "llama2-7b/*", "op": "*", "metric": "latency_ns",
"tolerance": 0.02, "reason": "..."}``; ``case`` and ``op`` are shell patterns (``op``
matches operator workload keys; ``""`` matches the case's own figures only), ``metric``
a figure name or ``*``.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field, replace
from fnmatch import fnmatchcase
from pathlib import Path

from sim import SIM_VERSION
from sim.errors import AutoschedError

from .files import read_versioned, write_atomic
from .results import CaseResult
from .tuned import DATA_DIR

__all__ = ["Baseline", "BaselineError", "Expected", "baseline_path"]

FORMAT = 1


class BaselineError(AutoschedError):
    """The baseline file is missing, malformed, or an update lacks its reason."""


def baseline_path(suite: str) -> Path:
    """Where the baseline of ``suite`` is checked in."""
    return DATA_DIR / f"baseline-{suite}.json"


@dataclass(frozen=True)
class Expected:
    """A figure allowed to move by at most ``tolerance`` (relative), and why."""

    case: str
    metric: str
    tolerance: float
    reason: str
    op: str = "*"

    def __post_init__(self) -> None:
        if not str(self.reason).strip():
            raise BaselineError(f"expected change for {self.case!r} has no reason: every "
                                "tolerance above zero says why a change is expected")
        if not isinstance(self.tolerance, int | float) or not self.tolerance >= 0:
            raise BaselineError(f"expected change for {self.case!r}: tolerance must be a "
                                f"number >= 0, got {self.tolerance!r}")

    def covers(self, case: str, op: str | None, metric: str) -> bool:
        """Whether this entry speaks for ``metric`` of ``op`` (None: the case) in ``case``."""
        op_ok = fnmatchcase(op, self.op) if op is not None else self.op in ("", "*")
        return (fnmatchcase(case, self.case) and op_ok
                and (self.metric == "*" or self.metric == metric))

    def to_dict(self) -> dict:
        return {"case": self.case, "op": self.op, "metric": self.metric,
                "tolerance": self.tolerance, "reason": self.reason}


@dataclass(frozen=True)
class Baseline:
    """The figures a suite is compared with (see the module docstring)."""

    suite: str
    suite_version: int
    cases: dict[str, CaseResult] = field(default_factory=dict)
    expected: tuple[Expected, ...] = ()
    updates: tuple[dict, ...] = ()
    sim_version: str = SIM_VERSION

    def allowance(self, case: str, op: str | None, metric: str) -> Expected | None:
        """The first ``expected`` entry covering this figure, if any."""
        return next((e for e in self.expected if e.covers(case, op, metric)), None)

    def updated(self, results: list[CaseResult], *, suite_version: int, reason: str,
                commit: dict, changed: list[str]) -> Baseline:
        """A new baseline: ``results`` replace their cases, the update is logged."""
        if not reason or not reason.strip():
            raise BaselineError("--update needs --reason TEXT saying why the figures changed")
        cases = {**self.cases, **{r.case: r for r in results}}
        log = {"time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), **commit,
               "reason": reason.strip(), "changed": sorted(changed)}
        return replace(self, cases=dict(sorted(cases.items())), suite_version=suite_version,
                       updates=(*self.updates, log), sim_version=SIM_VERSION)

    def without(self, ids: set[str]) -> Baseline:
        """This baseline without the cases ``ids`` (a suite that no longer has them)."""
        return replace(self, cases={k: v for k, v in self.cases.items() if k not in ids})

    def to_dict(self) -> dict:
        return {"format": FORMAT, "suite": self.suite, "suite_version": self.suite_version,
                "sim_version": self.sim_version,
                "expected": [e.to_dict() for e in self.expected],
                "updates": list(self.updates),
                "cases": {k: v.to_dict() for k, v in sorted(self.cases.items())}}

    def save(self, path: str | Path) -> None:
        write_atomic(Path(path), json.dumps(self.to_dict(), indent=1) + "\n", BaselineError)

    @classmethod
    def load(cls, path: str | Path) -> Baseline:
        p = Path(path)
        d = read_versioned(p, "baseline", FORMAT, BaselineError,
                           "create it with autosched regress --update --reason TEXT")
        try:
            return cls(str(d["suite"]), int(d["suite_version"]),
                       {k: CaseResult.from_dict(k, v) for k, v in d["cases"].items()},
                       tuple(Expected(**e) for e in d.get("expected", ())),
                       tuple(d.get("updates", ())), str(d.get("sim_version", "")))
        except BaselineError:
            raise
        except (KeyError, TypeError, AttributeError, ValueError) as e:
            raise BaselineError(f"baseline {p} is malformed: {e!r}") from None
