"""The cost-model interface: fit on measurements, predict a score per candidate.

A candidate is a :class:`Candidate`: the workload, its space and point, the hardware and
the lowered program (built by the caller; building is cheap, simulating is not). Lower
predictions mean faster. Models are interchangeable: XGBoost regression and ranking,
the analytical bound, random. Save/load use each model's own format (XGBoost JSON/UBJSON
for the learned ones), never pickle.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from search_spaces import Space, Workload
from sim.hardware import Hardware
from sim.program import Program

__all__ = ["Candidate", "CostModel"]


@dataclass(frozen=True)
class Candidate:
    """One schedule of one workload on one hardware, lowered but not simulated."""

    workload: Workload
    space: Space
    point: tuple[tuple[str, object], ...]
    hw: Hardware
    program: Program

    @property
    def point_dict(self) -> dict:
        return dict(self.point)


class CostModel(abc.ABC):
    """fit / predict / save / load. Not thread-safe; one instance per search."""

    name: str = "model"

    @abc.abstractmethod
    def fit(self, candidates: Sequence[Candidate], latencies_ns: Sequence[float]) -> None:
        """(Re)train on measured candidates; failed ones carry ``inf`` and are skipped."""

    @abc.abstractmethod
    def predict(self, candidates: Sequence[Candidate]) -> np.ndarray:
        """A score per candidate; lower means predicted faster. Works before any fit."""

    def latency_ns(self, scores: np.ndarray) -> np.ndarray | None:
        """The latencies ``scores`` (from :meth:`predict`) stand for, in ns; None when the
        scores are only an order (a ranker, a random model). The task scheduler reads
        predicted gains from it."""
        return None

    @abc.abstractmethod
    def save(self, path: str | Path) -> None:
        """Write the model to ``path`` in the model's own format."""

    @classmethod
    @abc.abstractmethod
    def load(cls, path: str | Path) -> CostModel:
        """Read a model written by :meth:`save`."""
