"""A cheap stand-in for the cost model over a whole enumerated space.

Family a point to featurise it costs about as much as simulating a small one, so the
cost model can rank only points already lowered. A :class:`SpaceSurrogate` learns the
cost model's scores of the lowered points from the points' own encodings (each
parameter's value, one-hot choices; the slots of :meth:`Space.features`) and scores
every valid point of the space in one vectorised call. The search lowers the
surrogate's favourites, and the cost model, which sees their programs, ranks them: the
model's judgement reaches points far from those measured without lowering the space.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

import numpy as np
import xgboost as xgb

from search_spaces import Space

from .settings import SearchSettings

__all__ = ["SpaceSurrogate"]


class SpaceSurrogate:
    """Scores every point of ``points`` (valid points by schedule key) from its encoding.

    Deterministic for a seed; single-threaded (the search owns no spare core). Not
    thread-safe. Its trees, depth, learning rate and the rows it needs before it ranks
    anything are ``settings.surrogate_*``.
    """

    def __init__(self, space: Space, points: Mapping[str, dict], *, seed: int = 0,
                 settings: SearchSettings | None = None) -> None:
        self.keys = list(points)
        self.row = {k: i for i, k in enumerate(self.keys)}
        self.x = _encode(space, [points[k] for k in self.keys])
        self.seed, self.settings = seed, settings or SearchSettings()
        self.scores: np.ndarray | None = None

    def fit(self, keys: Sequence[str], scores: Sequence[float]) -> bool:
        """Learn ``scores`` (the cost model's, lower is faster) of the points ``keys``;
        rescore every point. False (and no scores) with fewer than
        ``settings.surrogate_rows`` known rows."""
        rows = [self.row[k] for k in keys if k in self.row]
        y = [s for k, s in zip(keys, scores, strict=True) if k in self.row]
        st = self.settings
        if len(rows) < st.surrogate_rows:
            self.scores = None
            return False
        params = {"tree_method": "hist", "max_depth": st.surrogate_depth,
                  "eta": st.surrogate_eta, "nthread": 1, "seed": self.seed, "verbosity": 0,
                  "objective": "reg:squarederror"}
        booster = xgb.train(params, xgb.DMatrix(self.x[rows], label=np.asarray(y)),
                            st.surrogate_trees)
        self.scores = np.asarray(booster.inplace_predict(self.x), dtype=float)
        return True

    def best(self, n: int, exclude: Collection[str]) -> list[str]:
        """The ``n`` best-scored keys not in ``exclude`` (none before a successful fit)."""
        if self.scores is None or n < 1:
            return []
        out = []
        for i in np.argsort(self.scores, kind="stable"):
            k = self.keys[i]
            if k not in exclude:
                out.append(k)
                if len(out) == n:
                    break
        return out


def _encode(space: Space, points: Sequence[dict]) -> np.ndarray:
    """The :meth:`Space.features` rows of ``points`` (valid, so conditions hold), with each
    parameter's encoding of each value computed once."""
    memo: dict[tuple[str, object], tuple[float, ...]] = {}
    rows = []
    for p in points:
        row: list[float] = []
        for q in space.params:
            v = p.get(q.name)
            key = (q.name, v)
            if key not in memo:
                memo[key] = q.domain.encode(v)
            row.extend(memo[key])
        rows.append(row)
    return np.asarray(rows, dtype=np.float64).reshape(len(points), -1)
