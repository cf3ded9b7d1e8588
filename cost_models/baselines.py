"""Baselines: the analytical bound, a seeded random order, and no model at all.

None of them learns: ``fit`` only checks its arguments. Each saves as a small JSON file
``{"kind": ..., ...}`` at the given path, which :func:`cost_models.load_cost_model` reads.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from sim.bound import bound
from sim.files import load_json
from sim.writes import write_atomic

from .base import Candidate, CostModel
from .errors import CostModelError

__all__ = ["BoundModel", "ConstantModel", "RandomModel", "read_json_model"]


def _check_fit(candidates: Sequence[Candidate], latencies_ns: Sequence[float]) -> None:
    if len(candidates) != len(latencies_ns):
        raise CostModelError(f"fit got {len(candidates)} candidates and {len(latencies_ns)} "
                             "latencies; pass one latency per candidate (inf when it failed)")


MAX_JSON_BYTES = 1 << 20  # a baseline's file is a few bytes


def read_json_model(path: str | Path, kind: str) -> dict:
    """The JSON of a baseline file, checked to be of ``kind``."""
    d = load_json(path, limit=MAX_JSON_BYTES, what="cost model", error=CostModelError)
    if not isinstance(d, dict) or d.get("kind") != kind:
        raise CostModelError(f"{path} is not a saved {kind!r} cost model")
    return d


def _save(path: str | Path, d: dict) -> None:
    write_atomic(Path(path), json.dumps(d), what="cost model", error=CostModelError)


class BoundModel(CostModel):
    """Score = the analytical lower bound of the candidate's program (``sim.bound``), in ns."""

    name = "bound"

    def __init__(self) -> None:
        self._cache: dict[tuple, float] = {}

    def fit(self, candidates: Sequence[Candidate], latencies_ns: Sequence[float]) -> None:
        _check_fit(candidates, latencies_ns)

    def predict(self, candidates: Sequence[Candidate]) -> np.ndarray:
        out = np.empty(len(candidates))
        for i, c in enumerate(candidates):
            key = (c.program, c.hw)
            if key not in self._cache:
                self._cache[key] = bound(c.program, c.hw).ns
            out[i] = self._cache[key]
        return out

    def latency_ns(self, scores: np.ndarray) -> np.ndarray | None:
        return np.asarray(scores, dtype=float)

    def save(self, path: str | Path) -> None:
        _save(path, {"kind": self.name})

    @classmethod
    def load(cls, path: str | Path) -> BoundModel:
        read_json_model(path, cls.name)
        return cls()


class RandomModel(CostModel):
    """A uniform score per candidate from a hash of (seed, task, point): reproducible
    across processes and independent of call order."""

    name = "random"

    def __init__(self, seed: int = 0) -> None:
        self.seed = int(seed)

    def fit(self, candidates: Sequence[Candidate], latencies_ns: Sequence[float]) -> None:
        _check_fit(candidates, latencies_ns)

    def _score(self, c: Candidate) -> float:
        blob = f"{self.seed}|{c.workload.key}|{c.hw.fingerprint}|{c.space.digest}|{c.point!r}"
        return int(hashlib.sha256(blob.encode()).hexdigest()[:13], 16) / float(16**13)

    def predict(self, candidates: Sequence[Candidate]) -> np.ndarray:
        return np.asarray([self._score(c) for c in candidates], dtype=float)

    def save(self, path: str | Path) -> None:
        _save(path, {"kind": self.name, "seed": self.seed})

    @classmethod
    def load(cls, path: str | Path) -> RandomModel:
        seed = read_json_model(path, cls.name).get("seed", 0)
        if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**32:
            raise CostModelError(f"{path}: seed must be an integer in [0, 2**32), got "
                                 f"{seed!r:.40}")
        return cls(seed=seed)


class ConstantModel(CostModel):
    """No model: every score is 0, so a stable sort keeps the proposer's order."""

    name = "none"

    def fit(self, candidates: Sequence[Candidate], latencies_ns: Sequence[float]) -> None:
        _check_fit(candidates, latencies_ns)

    def predict(self, candidates: Sequence[Candidate]) -> np.ndarray:
        return np.zeros(len(candidates))

    def save(self, path: str | Path) -> None:
        _save(path, {"kind": self.name})

    @classmethod
    def load(cls, path: str | Path) -> ConstantModel:
        read_json_model(path, cls.name)
        return cls()
