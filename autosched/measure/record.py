"""The measurement record and its key: one timed (workload, schedule, hardware).

A failed candidate is a record with ``error`` set and infinite latency: the search and
the database keep it, so it is never proposed or simulated again. A :class:`RecordKey`
names everything but the schedule that a measured figure depends on; the database
filters every query on it, so a record of another simulator version or space version
is never mistaken for a current one.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

from search_spaces.schedule import Schedule
from search_spaces.workload import Workload

__all__ = ["Measurement", "RecordKey"]


@dataclass(frozen=True)
class RecordKey:
    """Workload, hardware fingerprint, space and its version, simulator version.

    Two records with equal keys were measured under the same rules and compare; one with
    another simulator or space version is *stale* for this key.
    """

    workload: Workload
    hw_fingerprint: str
    space: str
    space_version: int
    sim_version: str

    @classmethod
    def current(cls, workload: Workload, hw_fingerprint: str, space: str,
                space_version: int) -> RecordKey:
        """The key of records measured by this simulator (``sim.SIM_VERSION``)."""
        from sim import SIM_VERSION

        return cls(workload, hw_fingerprint, space, space_version, SIM_VERSION)


@dataclass(frozen=True)
class Measurement:
    """What one simulation of one schedule returned, with everything that keys it."""

    workload: Workload
    schedule: Schedule
    hw_fingerprint: str
    hw_name: str
    sim_version: str
    latency_ns: float
    energy_pj: float
    bound_ns: float = 0.0
    error: str = ""
    created: float = field(default_factory=time.time, compare=False)

    @property
    def ok(self) -> bool:
        return not self.error and math.isfinite(self.latency_ns)

    @property
    def key(self) -> RecordKey:
        return RecordKey(self.workload, self.hw_fingerprint, self.schedule.space,
                         self.schedule.version, self.sim_version)

    @classmethod
    def failed(cls, workload: Workload, schedule: Schedule, hw_fingerprint: str, hw_name: str,
               sim_version: str, error: str) -> Measurement:
        """A failure record: infinite latency and energy, the error kept verbatim."""
        return cls(workload, schedule, hw_fingerprint, hw_name, sim_version,
                   math.inf, math.inf, 0.0, error or "unknown error")

    def to_dict(self) -> dict:
        return {
            "workload": self.workload.to_dict(),
            "schedule": self.schedule.to_dict(),
            "hw_fingerprint": self.hw_fingerprint,
            "hw_name": self.hw_name,
            "sim_version": self.sim_version,
            "latency_ns": None if math.isinf(self.latency_ns) else self.latency_ns,
            "energy_pj": None if math.isinf(self.energy_pj) else self.energy_pj,
            "bound_ns": self.bound_ns,
            "error": self.error,
            "created": self.created,
        }

    @classmethod
    def from_dict(cls, d: dict) -> Measurement:
        lat, en = d.get("latency_ns"), d.get("energy_pj")
        return cls(
            workload=Workload.from_dict(d["workload"]),
            schedule=Schedule.from_dict(d["schedule"]),
            hw_fingerprint=d["hw_fingerprint"],
            hw_name=d["hw_name"],
            sim_version=d["sim_version"],
            latency_ns=math.inf if lat is None else float(lat),
            energy_pj=math.inf if en is None else float(en),
            bound_ns=float(d.get("bound_ns", 0.0)),
            error=d.get("error", ""),
            created=float(d.get("created", 0.0)),
        )
