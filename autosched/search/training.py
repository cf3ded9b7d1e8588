"""The cost model's training set, shared by every task of one tuning run."""

from __future__ import annotations

from dataclasses import dataclass, field

from cost_models.base import Candidate, CostModel

__all__ = ["TrainingSet"]


@dataclass
class TrainingSet:
    """Measured candidates and their latencies (``inf`` for failures), in measurement order.

    Several tuners append to one set, so a refit after any task sees every task's data.
    Seed it with earlier data to give the model a head start. Not thread-safe.
    """

    candidates: list[Candidate] = field(default_factory=list)
    latencies_ns: list[float] = field(default_factory=list)

    def add(self, candidate: Candidate, latency_ns: float) -> None:
        self.candidates.append(candidate)
        self.latencies_ns.append(latency_ns)

    def refit(self, model: CostModel) -> None:
        """Fit ``model`` on everything collected so far (no-op while empty)."""
        if self.candidates:
            model.fit(self.candidates, self.latencies_ns)

    def __len__(self) -> int:
        return len(self.candidates)
