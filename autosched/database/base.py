"""The tuned-schedule database interface.

Contract: ``commit`` makes one measurement durable before it returns (a killed run
loses nothing already committed); implementations are safe to use from several
processes at once (no record lost); records are immutable once committed. Keys are
explicit: workload key, hardware fingerprint, space and space version, simulator
version, schedule key.
"""

from __future__ import annotations

import abc
from collections.abc import Iterable

from autosched.measure.record import Measurement
from search_spaces.schedule import Schedule
from search_spaces.workload import Workload

__all__ = ["Database", "DatabaseError"]

from sim.errors import AutoschedError


class DatabaseError(AutoschedError):
    """The database cannot be opened or read: corrupt file, wrong schema, bad URL."""


class Database(abc.ABC):
    """Stores every measurement; answers best and exact-match queries."""

    @abc.abstractmethod
    def commit(self, m: Measurement) -> None:
        """Store one measurement durably."""

    @abc.abstractmethod
    def find(self, workload: Workload, hw_fingerprint: str, schedule: Schedule,
             sim_version: str) -> Measurement | None:
        """The stored measurement of exactly this schedule, if any (success or failure)."""

    @abc.abstractmethod
    def records(self, *, workload: Workload | None = None, hw_fingerprint: str | None = None,
                op: str | None = None, space: str | None = None,
                space_version: int | None = None) -> list[Measurement]:
        """All matching measurements in commit order."""

    def best(self, workload: Workload, hw_fingerprint: str, *, space: str | None = None,
             space_version: int | None = None) -> Measurement | None:
        """The fastest successful measurement of this workload on this hardware."""
        ok = [m for m in self.records(workload=workload, hw_fingerprint=hw_fingerprint,
                                      space=space, space_version=space_version) if m.ok]
        return min(ok, key=lambda m: (m.latency_ns, m.created)) if ok else None

    def save_plan(self, key: str, hw_fingerprint: str, plan: dict, latency_ns: float) -> None:
        """Record the fusion plan chosen for ``key`` (model:phase:batch) on this hardware."""
        raise DatabaseError(f"{type(self).__name__} does not store fusion plans")

    def plan(self, key: str, hw_fingerprint: str) -> dict | None:
        """The fusion plan recorded for ``key`` on this hardware, if any."""
        return None

    def commit_many(self, ms: Iterable[Measurement]) -> None:
        for m in ms:
            self.commit(m)

    def __len__(self) -> int:
        return len(self.records())

    def close(self) -> None:  # noqa: B027 (optional hook, nothing to release by default)
        """Release connections (idempotent)."""
