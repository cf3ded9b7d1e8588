"""Which pending candidates to measure: the cost model's best plus a few exploratory ones."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from cost_models.base import Candidate, CostModel

__all__ = ["select"]


def select(keys: Sequence[str], candidates: Sequence[Candidate | None],
           model: CostModel | None, n_measure: int, n_explore: int, *,
           first: Sequence[str] = (), rng: np.random.Generator
           ) -> tuple[list[str], dict[str, float]]:
    """Up to ``n_measure`` of ``keys``: ``first`` (those present), then the rest; with the
    model's score of every key it ranked.

    Without a model the rest keep their order (the sampler's). With one, the rest are
    ranked by predicted latency (stable for ties): the top ``n_measure - len(first) -
    n_explore`` are taken, then ``n_explore`` drawn uniformly from the others, so the
    model keeps receiving data from outside its own favourites. ``candidates[i]`` is the
    lowered candidate of ``keys[i]`` (needed only with a model).
    """
    head = [k for k in first if k in keys]
    rest = [i for i, k in enumerate(keys) if k not in head]
    room = max(n_measure - len(head), 0)
    if model is None or not rest:
        return head + [keys[i] for i in rest[:room]], {}
    scores = np.asarray(model.predict([candidates[i] for i in rest]), dtype=float)
    by_key = {keys[i]: float(v) for i, v in zip(rest, scores, strict=True)}
    if len(rest) <= room:
        return head + [keys[i] for i in rest], by_key
    ranked = [keys[rest[i]] for i in np.argsort(scores, kind="stable")]
    n_top = max(room - n_explore, 0)
    top, others = ranked[:n_top], ranked[n_top:]
    n_rand = min(room - n_top, len(others))
    explore = [others[i] for i in sorted(rng.choice(len(others), n_rand, replace=False))]
    return head + top + explore, by_key
