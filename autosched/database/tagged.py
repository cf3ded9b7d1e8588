"""One run's view of a database: its commits are tagged and counted.

A tuning run commits through a :class:`RunDatabase`, which tags each new record with
the run's job and owner (on an :class:`SqlDatabase`) and counts the records this run
actually added, so a report counts its own measurements even when other processes
write to the same database at the same time.
"""

from __future__ import annotations

from collections.abc import Iterator

from autosched.measure.record import Measurement, RecordKey
from search_spaces.schedule import Schedule
from search_spaces.workload import Workload

from .base import Database, Stale
from .sql import SqlDatabase

__all__ = ["RunDatabase"]


class RunDatabase(Database):
    """Delegates to ``inner``; ``inserted`` counts the new records committed through it."""

    def __init__(self, inner: Database, *, job: int | None = None, run: str | None = None
                 ) -> None:
        self.inner, self.job, self.run = inner, job, run
        self.inserted = 0

    def commit(self, m: Measurement) -> bool:
        if isinstance(self.inner, SqlDatabase):
            new = self.inner.commit(m, job=self.job, run=self.run)
        else:
            new = self.inner.commit(m)
        self.inserted += int(new)
        return new

    def find(self, workload: Workload, hw_fingerprint: str, schedule: Schedule,
             sim_version: str) -> Measurement | None:
        return self.inner.find(workload, hw_fingerprint, schedule, sim_version)

    def records(self, key: RecordKey | None = None, **filters) -> list[Measurement]:
        return self.inner.records(key, **filters)

    def best(self, key: RecordKey) -> Measurement | None:
        return self.inner.best(key)

    def nearest(self, key: RecordKey) -> Iterator[Measurement]:
        return self.inner.nearest(key)

    def count(self, key: RecordKey) -> int:
        return self.inner.count(key)

    def stale(self, key: RecordKey) -> list[Stale]:
        return self.inner.stale(key)

    def save_plan(self, key: str, hw_fingerprint: str, plan: dict, latency_ns: float) -> None:
        self.inner.save_plan(key, hw_fingerprint, plan, latency_ns)

    def plan(self, key: str, hw_fingerprint: str) -> dict | None:
        return self.inner.plan(key, hw_fingerprint)

    def plan_keys(self, hw_fingerprint: str) -> list[str]:
        return self.inner.plan_keys(hw_fingerprint)

    def __len__(self) -> int:
        return len(self.inner)
