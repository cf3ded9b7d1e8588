"""Schedule lookup: exact match, else the nearest tuned workload re-validated, else default.

The answer says which of the three it was, so ``compile`` and ``lookup`` can report how
much of a model actually ran tuned.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from autosched.measure.record import Measurement
from search_spaces import Schedule, Workload
from sim.hardware import Hardware

from .codegen.registry import lowering_for
from .database import Database

__all__ = ["LookupResult", "lookup", "shape_distance"]

@dataclass(frozen=True)
class LookupResult:
    """``kind`` is exact | nearest | default (or, from the compiler, library | given |
    baseline); ``source`` is the measurement reused, if any."""

    kind: str
    workload: Workload
    schedule: Schedule
    source: Measurement | None = None

    @property
    def latency_ns(self) -> float:
        """Measured latency of the schedule on this very workload (exact only), else nan."""
        return self.source.latency_ns if self.kind == "exact" and self.source else math.nan

    def to_dict(self) -> dict:
        return {
            "kind": self.kind,
            "workload": self.workload.key,
            "schedule": self.schedule.to_dict(),
            "from_workload": self.source.workload.key if self.source else None,
            "latency_ns": None if math.isnan(self.latency_ns) else self.latency_ns,
        }


def shape_distance(a: Workload, b: Workload) -> float:
    """Sum over dims of |log(a/b)|; infinite across families, dtypes or attributes."""
    if a.op != b.op or a.dtype != b.dtype or a.attrs != b.attrs:
        return math.inf
    da, db = a.dims, b.dims
    return sum(abs(math.log(da[k] / db[k])) for k in da)


def lookup(db: Database | None, workload: Workload, hw: Hardware) -> LookupResult:
    """The schedule to compile ``workload`` with on ``hw``."""
    low = lowering_for(workload)
    space = low.space(workload, hw)
    if db is not None:
        best = db.best(workload, hw.fingerprint, space=space.name, space_version=space.version)
        if best is not None:
            return LookupResult("exact", workload, best.schedule, best)
        others: dict[str, Measurement] = {}
        for m in db.records(op=workload.op, hw_fingerprint=hw.fingerprint, space=space.name,
                            space_version=space.version):
            if m.ok and m.workload != workload:
                cur = others.get(m.workload.key)
                if cur is None or m.latency_ns < cur.latency_ns:
                    others[m.workload.key] = m
        near = sorted(others.values(), key=lambda m: (shape_distance(workload, m.workload),
                                                      m.workload.key))
        for m in near:
            if math.isfinite(shape_distance(workload, m.workload)) \
                    and not space.validate(m.schedule.point):
                return LookupResult("nearest", workload, Schedule.of(space, m.schedule.point), m)
    return LookupResult("default", workload, Schedule.of(space, low.default(workload, hw)))
