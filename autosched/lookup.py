"""Schedule lookup: exact match, else a near tuned workload re-validated, else default.

The answer says which of the three it was, so ``compile`` and ``lookup`` can report how
much of a model actually ran tuned. Every query filters on the record key of this
workload on this hardware (space, space version and simulator version included):
records of an older simulator or space are *stale*, never an exact or nearest answer,
and the answer counts them so that the user learns why the default was chosen.

A nearest answer must lie within :data:`NEAREST_RADIUS` of the workload (summed
``|log ratio|`` of the dims: a factor of about 5 in one dim, or 2.2 in each of two). A
schedule tuned for a shape much smaller or larger is no evidence for this one: llama-tiny's
GEMVs (256 to 688 wide) handed to llama2-70b's (8192 and more) made its step 17 % slower
than the defaults.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

from autosched.measure.record import Measurement, RecordKey
from search_spaces import Schedule, Workload
from sim.hardware import Hardware

from .database import Database
from .database.base import Stale
from .database.nearest import shape_distance
from .families import family_of, space_of

__all__ = ["NEAREST_RADIUS", "LookupKind", "LookupResult", "lookup", "shape_distance"]

NEAREST_RADIUS = 1.6


class LookupKind(enum.StrEnum):
    """Where a compiled operator's schedule came from."""

    EXACT = "exact"  # the database's best for this very workload
    NEAREST = "nearest"  # the best of a similar shape, re-validated for this one
    DEFAULT = "default"  # the family's default (nothing tuned applies)
    LIBRARY = "library"  # the shipped library kernel
    GIVEN = "given"  # the caller's own, per node
    FITTED = "fitted"  # a denser layout the compiler chose so the step fits its device
    PIM = "pim"  # the step's plan keeps every engine choice in the banks
    HOST = "host"  # the step's plan puts every engine choice on the host

    @property
    def looked_up(self) -> bool:
        """Found by :func:`lookup` (the compiler may still move it)."""
        return self in (LookupKind.EXACT, LookupKind.NEAREST, LookupKind.DEFAULT)

    @property
    def fixed(self) -> bool:
        """Chosen for this very node (given, or fitted already): never moved again."""
        return self in (LookupKind.GIVEN, LookupKind.FITTED)


@dataclass(frozen=True)
class LookupResult:
    """``kind`` says where the schedule came from (:class:`LookupKind`); ``source`` is the
    measurement reused, if any.

    ``stale`` lists (space version, simulator version, records) of this workload on this
    hardware that did not count because their versions differ from the current ones.
    """

    kind: LookupKind
    workload: Workload
    schedule: Schedule
    source: Measurement | None = None
    stale: tuple[Stale, ...] = ()

    @property
    def latency_ns(self) -> float:
        """Measured latency of the schedule on this very workload (exact only), else nan."""
        return self.source.latency_ns if self.kind is LookupKind.EXACT and self.source \
            else math.nan

    @property
    def stale_note(self) -> str:
        """``""``, or why stored records of this workload did not count."""
        if not self.stale:
            return ""
        n = sum(c for _, _, c in self.stale)
        what = ", ".join(f"space v{sv} / simulator {sim}" for sv, sim, _ in self.stale)
        return (f"{n} stale record(s) of this workload ignored (measured with {what}; "
                "tune again to replace them)")

    def to_dict(self) -> dict:
        return {
            "kind": str(self.kind),
            "workload": self.workload.key,
            "schedule": self.schedule.to_dict(),
            "from_workload": self.source.workload.key if self.source else None,
            "latency_ns": None if math.isnan(self.latency_ns) else self.latency_ns,
            "stale": [{"space_version": sv, "sim_version": sim, "records": n}
                      for sv, sim, n in self.stale],
        }


def lookup(db: Database | None, workload: Workload, hw: Hardware) -> LookupResult:
    """The schedule to compile ``workload`` with on ``hw``."""
    low = family_of(workload)
    space = space_of(workload, hw)
    stale: tuple[Stale, ...] = ()
    if db is not None:
        key = RecordKey.current(workload, hw.fingerprint, space.name, space.version)
        best = db.best(key)
        if best is not None:
            return LookupResult(LookupKind.EXACT, workload, best.schedule, best)
        stale = tuple(db.stale(key))
        for m in db.nearest(key):
            if shape_distance(workload, m.workload) > NEAREST_RADIUS:
                break  # nearest first: every later one is farther
            if not space.validate(m.schedule.point):
                return LookupResult(LookupKind.NEAREST, workload,
                                    Schedule.of(space, m.schedule.point), m, stale)
    return LookupResult(LookupKind.DEFAULT, workload,
                        Schedule.of(space, low.default(workload, hw)), None, stale)
