"""The tuned-schedule export: the schedules the suite's tuned cases compile with.

A checked-in JSON file (``data/tuned.json``) holds, per preset name, the best schedule of
every workload of the suite's tuned cases, taken once from a tuning database, so the suite
measures the compiler and the simulator and never the luck of a search. It is read-only
for the suite; ``experiments/regress_tune.py`` regenerates it (tune, then
:func:`export_from_db`). The tuning database itself is never consulted by the suite.

Format: ``{"format": 1, "tuning": {...how it was tuned...}, "hardware": {preset:
{"fingerprint": ..., "schedules": {workload key: {"schedule": {...}, "latency_ns": ...}}}}}``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from autosched.database import Database, open_database
from autosched.families.registry import space_of
from autosched.ir import OpGraph
from autosched.lookup import LookupKind, LookupResult
from autosched.measure.record import RecordKey
from search_spaces import Schedule, Workload
from search_spaces.errors import ScheduleError
from sim.errors import AutoschedError
from sim.hardware import Hardware

from .files import read_versioned, write_atomic
from .sources import DatabaseSchedules, ScheduleSource

__all__ = ["DATA_DIR", "TUNED_PATH", "TunedExport", "TunedExportError", "export_from_db",
           "open_schedules"]

DATA_DIR = Path(__file__).parent / "data"
TUNED_PATH = DATA_DIR / "tuned.json"
FORMAT = 1


class TunedExportError(AutoschedError):
    """The tuned-schedule export is missing, malformed or lacks a workload."""


@dataclass(frozen=True)
class TunedEntry:
    """One exported schedule and the latency the tuning database measured for it."""

    schedule: Schedule
    latency_ns: float


@dataclass(frozen=True)
class TunedExport(ScheduleSource):
    """Preset name -> (fingerprint, workload key -> entry); ``tuning`` says how it was made."""

    hardware: dict[str, tuple[str, dict[str, TunedEntry]]] = field(default_factory=dict)
    tuning: dict = field(default_factory=dict)

    def choices(self, graph: OpGraph, hw: Hardware) -> dict[str, LookupResult]:
        """Node name -> exported schedule (kind ``exact``) for every node of ``graph`` on
        preset ``hw.name``. Raises :class:`TunedExportError` naming every workload the
        export lacks."""
        _, entries = self.hardware.get(hw.name, ("", {}))
        missing = sorted({n.workload.key for n in graph if n.workload.key not in entries})
        if missing:
            raise TunedExportError(
                f"the tuned-schedule export has no schedule on {hw.name} for "
                f"{len(missing)} workload(s) ({', '.join(missing[:3])}"
                f"{', ...' if len(missing) > 3 else ''}): regenerate it with "
                "python -m experiments.regress_tune")
        return {n.name: LookupResult(LookupKind.EXACT, n.workload, entries[n.workload.key].schedule)
                for n in graph}

    def merged(self, other: TunedExport) -> TunedExport:
        """This export with ``other``'s entries added (``other`` wins on a clash)."""
        hw = {name: (fp, dict(entries)) for name, (fp, entries) in self.hardware.items()}
        for name, (fp, entries) in other.hardware.items():
            hw[name] = (fp, {**hw.get(name, ("", {}))[1], **entries})
        return TunedExport(hw, {**self.tuning, **other.tuning})

    def to_dict(self) -> dict:
        return {"format": FORMAT, "tuning": self.tuning, "hardware": {
            name: {"fingerprint": fp, "schedules": {
                k: {"schedule": e.schedule.to_dict(), "latency_ns": e.latency_ns}
                for k, e in sorted(entries.items())}}
            for name, (fp, entries) in sorted(self.hardware.items())}}

    def save(self, path: str | Path = TUNED_PATH) -> None:
        """Write atomically (a killed writer leaves the old file whole)."""
        write_atomic(Path(path), json.dumps(self.to_dict(), indent=1) + "\n", TunedExportError)

    @classmethod
    def load(cls, path: str | Path = TUNED_PATH) -> TunedExport:
        p = Path(path)
        d = read_versioned(p, "tuned-schedule export", FORMAT, TunedExportError,
                           "generate it with python -m experiments.regress_tune")
        try:
            hw = {name: (h["fingerprint"], {k: TunedEntry(Schedule.from_dict(e["schedule"]),
                                                          float(e["latency_ns"]))
                                            for k, e in h["schedules"].items()})
                  for name, h in d["hardware"].items()}
        except (KeyError, TypeError, AttributeError, ValueError, ScheduleError) as e:
            raise TunedExportError(f"tuned-schedule export {p} is malformed: {e}") from None
        return cls(hw, dict(d.get("tuning", {})))


def export_from_db(db: Database, workloads: Iterable[Workload], hw: Hardware,
                   tuning: dict | None = None) -> TunedExport:
    """The best measured schedule of each workload on ``hw`` (exact matches only).

    Raises :class:`TunedExportError` naming the workloads the database never measured.
    """
    entries: dict[str, TunedEntry] = {}
    missing = []
    for w in workloads:
        space = space_of(w, hw)
        best = db.best(RecordKey.current(w, hw.fingerprint, space.name, space.version))
        if best is None:
            missing.append(w.key)
        else:
            entries[w.key] = TunedEntry(best.schedule, best.latency_ns)
    if missing:
        raise TunedExportError(f"the database has no measurement on {hw.name} of "
                               f"{', '.join(sorted(set(missing)))}: tune them first")
    return TunedExport({hw.name: (hw.fingerprint, entries)}, dict(tuning or {}))


def open_schedules(src: str | Path | ScheduleSource | Database) -> ScheduleSource:
    """A source as given; a ``.json`` path is an export; any other path or URL a database."""
    if isinstance(src, ScheduleSource):
        return src
    if isinstance(src, Database):
        return DatabaseSchedules(src)
    if str(src).endswith(".json"):
        return TunedExport.load(src)
    if "://" not in str(src) and not Path(src).exists():
        raise TunedExportError(f"no tuning database at {src}: tune first (autosched tune) "
                               "or give a tuned-schedule export (.json)")
    return DatabaseSchedules(open_database(src, readonly=True))
