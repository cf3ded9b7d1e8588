"""The tuned-schedule database interface.

Contract (every implementation runs :mod:`autosched.database.contract`):

* ``commit`` makes one measurement durable before it returns (a killed run loses nothing
  already committed) and is idempotent: a measurement whose key (record key + schedule)
  is stored already is not stored again, and ``commit`` says so by returning False;
* records are immutable once committed and come back equal (``from_dict(to_dict())``);
* ``best``, ``nearest``, ``count`` and ``stale`` filter on a :class:`RecordKey`: records
  of another simulator or space version never answer for the current one;
* an implementation is safe to use from several processes at once, each with its own
  instance (no record lost, none duplicated); one instance serves one thread at a time.
"""

from __future__ import annotations

import abc
from collections.abc import Iterable, Iterator

from autosched.measure.record import Measurement, RecordKey
from search_spaces.schedule import Schedule
from search_spaces.workload import Workload
from sim.errors import AutoschedError

from .nearest import family_of, shape_distance

__all__ = ["Database", "DatabaseError", "Stale"]

Stale = tuple[int, str, int]  # (space version, simulator version, records)


class DatabaseError(AutoschedError):
    """The database cannot be opened, read or written: corrupt or foreign file, newer
    schema, bad URL, missing driver, unreachable server, full disk."""


class Database(abc.ABC):
    """Stores every measurement; answers exact, best and nearest-workload queries."""

    @abc.abstractmethod
    def commit(self, m: Measurement) -> bool:
        """Store one measurement durably; False if its key and schedule were stored."""

    @abc.abstractmethod
    def find(self, workload: Workload, hw_fingerprint: str, schedule: Schedule,
             sim_version: str) -> Measurement | None:
        """The stored measurement of exactly this schedule, if any (success or failure)."""

    @abc.abstractmethod
    def records(self, key: RecordKey | None = None, *, workload: Workload | None = None,
                hw_fingerprint: str | None = None, op: str | None = None,
                space: str | None = None, space_version: int | None = None,
                sim_version: str | None = None) -> list[Measurement]:
        """All matching measurements in commit order; ``key`` sets five filters at once."""

    def best(self, key: RecordKey) -> Measurement | None:
        """The fastest successful measurement under ``key`` (the first committed among
        equals)."""
        ok = [m for m in self.records(key) if m.ok]
        return min(ok, key=lambda m: m.latency_ns) if ok else None

    def nearest(self, key: RecordKey) -> Iterator[Measurement]:
        """The best measurement of every *other* workload of the same family, dtype and
        attributes under the rest of ``key``, nearest shape first (ties by workload key)."""
        best: dict[str, Measurement] = {}
        for m in self.records(op=key.workload.op, hw_fingerprint=key.hw_fingerprint,
                              space=key.space, space_version=key.space_version,
                              sim_version=key.sim_version):
            if m.ok and family_of(m.workload) == family_of(key.workload) \
                    and m.workload != key.workload:
                cur = best.get(m.workload.key)
                if cur is None or m.latency_ns < cur.latency_ns:
                    best[m.workload.key] = m
        yield from sorted(best.values(), key=lambda m: (
            shape_distance(key.workload, m.workload), m.workload.key))

    def count(self, key: RecordKey) -> int:
        """Records stored under ``key`` (failures included)."""
        return len(self.records(key))

    def stale(self, key: RecordKey) -> list[Stale]:
        """Records of this workload, hardware and space under *other* space or simulator
        versions: (space version, simulator version, records), oldest versions first."""
        counts: dict[tuple[int, str], int] = {}
        for m in self.records(workload=key.workload, hw_fingerprint=key.hw_fingerprint,
                              space=key.space):
            if (m.schedule.version, m.sim_version) != (key.space_version, key.sim_version):
                v = (m.schedule.version, m.sim_version)
                counts[v] = counts.get(v, 0) + 1
        return [(sv, sim, n) for (sv, sim), n in sorted(counts.items())]

    def save_plan(self, key: str, hw_fingerprint: str, plan: dict, latency_ns: float) -> None:
        """Record the fusion plan chosen for ``key`` (model:phase:batch) on this hardware."""
        raise DatabaseError(f"{type(self).__name__} does not store fusion plans")

    def plan(self, key: str, hw_fingerprint: str) -> dict | None:
        """The fusion plan recorded for ``key`` on this hardware, if any."""
        return None

    def plan_keys(self, hw_fingerprint: str) -> list[str]:
        """Every key a plan is recorded under on this hardware, sorted."""
        return []

    def commit_many(self, ms: Iterable[Measurement]) -> int:
        """Commit each measurement; returns how many were new."""
        return sum(self.commit(m) for m in ms)

    def __len__(self) -> int:
        return len(self.records())

    def close(self) -> None:  # noqa: B027 (optional hook, nothing to release by default)
        """Release connections (idempotent)."""
