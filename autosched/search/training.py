"""The cost model's training set, shared by every task of one tuning run."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from cost_models.base import Candidate, CostModel
from sim import SIM_VERSION
from sim.errors import AutoschedError
from sim.hardware import Hardware
from sim.hwio import preset_hardware

from ..database import Database
from ..families import build, family_of

__all__ = ["TrainingSet", "known_hardware"]


def known_hardware(*extra: Hardware) -> dict[str, Hardware]:
    """Hardware whose stored measurements can be featurized again: the presets and ``extra``,
    by fingerprint (the database keeps only a record's fingerprint and name)."""
    out = {hw.fingerprint: hw for hw in preset_hardware()}
    out.update({hw.fingerprint: hw for hw in extra})
    return out


@dataclass
class TrainingSet:
    """Measured candidates and their latencies (``inf`` for failures), in measurement order.

    Several tuners append to one set, so a refit after any task sees every task's data.
    Seed it with earlier data (:meth:`add_history`) to give the model a head start. Not
    thread-safe.
    """

    candidates: list[Candidate] = field(default_factory=list)
    latencies_ns: list[float] = field(default_factory=list)
    fits: int = 0  # refits so far: predictions change only when this does

    def add(self, candidate: Candidate, latency_ns: float) -> None:
        self.candidates.append(candidate)
        self.latencies_ns.append(latency_ns)

    def add_history(self, db: Database, hardware: Mapping[str, Hardware],
                    skip: Collection[str], limit: int) -> int:
        """Add the newest ``limit`` successful measurements of *other* tasks from ``db``
        (a run passes ``SearchSettings.history_limit``).

        A task is ``"<workload key>@<hardware fingerprint>"``; those in ``skip`` (the run's
        own tasks, which their tuners resume) are left out, as are records of hardware not
        in ``hardware``, of another simulator version, or of a space whose current version
        differs. Each record is lowered again for its features. Returns how many were added.
        """
        added = 0
        for m in reversed(db.records()):
            if added >= limit:
                break
            hw = hardware.get(m.hw_fingerprint)
            if (not m.ok or hw is None or m.sim_version != SIM_VERSION
                    or f"{m.workload.key}@{m.hw_fingerprint}" in skip):
                continue
            try:
                space = family_of(m.workload).space(m.workload, hw)
                if (m.schedule.space, m.schedule.version) != (space.name, space.version):
                    continue
                point = m.schedule.point
                program = build(m.workload, point, hw).program
            except AutoschedError:
                continue  # a family or point this code no longer lowers: not usable
            self.add(Candidate(m.workload, space, tuple(sorted(point.items())), hw, program),
                     m.latency_ns)
            added += 1
        return added

    def refit(self, model: CostModel) -> None:
        """Fit ``model`` on everything collected so far (no-op while empty)."""
        if self.candidates:
            model.fit(self.candidates, self.latencies_ns)
            self.fits += 1

    def __len__(self) -> int:
        return len(self.candidates)
