"""Neighbourhood moves and the space surrogate: structure, determinism, validity left to
the pool."""

from __future__ import annotations

import numpy as np

from autosched.search.moves import around, one_change
from autosched.search.surrogate import SpaceSurrogate
from search_spaces import Categorical, IntRange, Param, Schedule, Space
from search_spaces.params import Cond

SPACE = Space("toy", 1, (
    Param("place", Categorical(("pim", "host"))),
    Param("split", IntRange(1, 8), Cond("place", "pim")),
    Param("tile", Categorical((8, 16, 32)), Cond("place", "pim")),
))


def test_one_change_moves_change_exactly_one_active_parameter() -> None:
    p = {"place": "pim", "split": 2, "tile": 16}
    moves = list(one_change(SPACE, p))
    # place -> host drops the conditional parameters; 7 other splits; 2 other tiles
    assert {"place": "host"} in moves and len(moves) == 1 + 7 + 2
    for q in moves[1:]:
        assert sum(q[k] != p[k] for k in p) == 1
    host = list(one_change(SPACE, {"place": "host"}))
    assert host == [{"place": "pim", "split": 1, "tile": 8}]  # switched on: first values


def test_around_is_deterministic_distinct_and_excludes_the_start() -> None:
    best = [{"place": "pim", "split": 2, "tile": 16}, {"place": "pim", "split": 4, "tile": 8}]
    a = around(SPACE, best, np.random.default_rng(0), n_second=2, n_two=3)
    b = around(SPACE, best, np.random.default_rng(0), n_second=2, n_two=3)
    keys = [Schedule.of(SPACE, q).key for q in a]
    assert a == b and len(keys) == len(set(keys))
    assert Schedule.of(SPACE, best[0]).key not in keys
    assert all(q in a for q in one_change(SPACE, best[0]))
    assert around(SPACE, [], np.random.default_rng(0), n_second=2, n_two=3) == []


def test_surrogate_learns_scores_and_ranks_unseen_points() -> None:
    points = {Schedule.of(SPACE, p).key: p for p in SPACE.enumerate()}
    sur = SpaceSurrogate(SPACE, points, seed=0)
    truth = {k: (p.get("split", 9) * 10 + p.get("tile", 0)) for k, p in points.items()}
    keys = list(points)
    assert not sur.fit(keys[:5], [truth[k] for k in keys[:5]]) and sur.best(3, set()) == []
    seen = keys[::2]
    assert sur.fit(seen, [truth[k] for k in seen])
    best = sur.best(3, set(seen))
    assert len(best) == 3 and not set(best) & set(seen)
    assert min(truth[k] for k in best) <= sorted(truth[k] for k in keys[1::2])[2]
