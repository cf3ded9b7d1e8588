"""The cost model's view of one task: neighbourhood moves, surrogate picks, the outlook.

:class:`ModelView` is the part of a :class:`~.tuner.TaskTuner` that asks the cost model
about the task's unmeasured points: the Optuna strategy ranks the moves and surrogate
picks it offers, and the task scheduler reads the outlook (the predicted best of an
unmeasured candidate and the model's recent error on the task) to spend the budget.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .moves import around
from .surrogate import SpaceSurrogate

if TYPE_CHECKING:
    from autosched.measure.record import Measurement
    from cost_models.base import CostModel
    from search_spaces import Space

    from .pool import CandidatePool
    from .settings import SearchSettings
    from .training import TrainingSet

__all__ = ["ModelView"]


class ModelView:
    """Mixed into :class:`~.tuner.TaskTuner`, whose state it reads (the attributes
    annotated below, and its ``rng``); keeps the space surrogate and the last outlook."""

    space: Space
    pool: CandidatePool
    settings: SearchSettings
    cost_model: CostModel | None
    training: TrainingSet
    measurements: list[Measurement]
    exhausted: bool
    seed: int
    errors: list[float]  # model log2 error on each measured ranked point
    _by_key: dict[str, Measurement]
    _outlook: tuple[tuple, tuple[float, float] | None] | None = None
    _surrogate: SpaceSurrogate | None = None

    def moves(self, rng: np.random.Generator) -> list[dict]:
        """Neighbourhood moves around the three fastest measured points (:func:`.moves.around`)."""
        ok = sorted((m for m in self.measurements if m.ok), key=lambda m: m.latency_ns)
        best = [m.schedule.point for m in ok[:3]
                if not self.space.validate(m.schedule.point, constraints=False)]
        return around(self.space, best, rng, n_second=self.settings.n_second,
                      n_two=self.settings.n_two)

    def surrogate_picks(self, n: int, keys: list[str] | None = None) -> list[dict]:
        """The ``n`` unlowered valid points that a :class:`SpaceSurrogate` of the cost
        model's scores of ``keys`` (lowered points; default: the pending ones) likes best,
        on enumerable spaces only."""
        valid = self.pool.valid_points()
        if valid is None:
            return []
        if self._surrogate is None:
            self._surrogate = SpaceSurrogate(self.space, valid, seed=self.seed,
                                             settings=self.settings)
        keys = list(self.pool.pending) if keys is None else keys
        cands = [self.pool.store(k) for k in keys]
        scores = np.asarray(self.cost_model.predict(cands), dtype=float)
        if not self._surrogate.fit(keys, scores):
            return []
        lowered = self.pool.lowered_keys()
        skip = set(self._by_key) | set(self.pool.pending) | lowered | set(self.pool.invalid)
        return [valid[k] for k in self._surrogate.best(n, skip)]

    @property
    def noise(self) -> float:
        """The model's recent log2 error on this task's measured points (RMS of the last
        ``noise_window`` predictions made before measuring), at least ``noise_floor``;
        ``prior_noise`` before two such predictions exist."""
        s = self.settings
        if len(self.errors) < 2:
            return s.prior_noise
        e = np.asarray(self.errors[-s.noise_window:])
        return max(float(np.sqrt(np.mean(e * e))), s.noise_floor)

    def outlook(self) -> tuple[float, float] | None:
        """(predicted best latency of an unmeasured candidate in ns, model noise in log2),
        or None without a model that predicts latencies or without any lowered candidate.

        Ranks every candidate lowered so far, the neighbourhood moves around the best
        points, ``outlook_random`` random valid points and, on enumerable spaces, the
        ``outlook_picks`` points a surrogate of the model's scores likes best (all lowered
        now, once). The points are gathered again only when the task's own measurements
        changed; a refit of the model (another task's round) only re-predicts them.
        """
        model = self.cost_model
        if model is None or self.exhausted or model.latency_ns(np.zeros(1)) is None:
            return None
        state = (self.measured, self.training.fits)
        if self._outlook is not None and self._outlook[0] == state:
            return self._outlook[1]
        if self._outlook is None or self._outlook[0][0] != self.measured:
            rng = self.rng(3)
            for p in self.moves(rng):
                self.pool.prepare(p)
            for p in self.pool.unmeasured(rng, self.settings.outlook_random, self._by_key):
                self.pool.prepare(p)
            keys = [self.pool.key(p) for p in self.pool.lowered(self._by_key)]
            for p in self.surrogate_picks(self.settings.outlook_picks, keys):
                self.pool.prepare(p)
        cands = [self.pool.candidate(p) for p in self.pool.lowered(self._by_key)]
        cands = [c for c in cands if c is not None]
        out = None
        if cands:
            pred = model.latency_ns(np.asarray(model.predict(cands), dtype=float))
            out = (float(np.min(pred)), self.noise)
        self._outlook = (state, out)
        return out
