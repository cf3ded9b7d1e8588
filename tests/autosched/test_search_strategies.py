"""Every search strategy passes the strategy contract; the evolutionary strategy's own
moves: crossover under the space's conditions, mutation by one change, elitist parents."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from autosched.measure import LocalRunner
from autosched.search import (
    SCHEDULERS,
    STRATEGIES,
    EvolutionarySearch,
    SearchContext,
    SearchError,
    SearchSettings,
    SearchStrategy,
    TaskTuner,
    make_scheduler,
    make_strategy,
)
from autosched.search.contract import TASK, StrategyContract
from autosched.search.evolution import crossover, mutate
from autosched.search.moves import one_change
from search_spaces import Categorical, Cond, Constraint, IntRange, Param, Space, Var

SPACE = Space("toy", 1, (
    Param("place", Categorical(("pim", "host"))),
    Param("split", IntRange(1, 8), Cond("place", "pim")),
    Param("tile", Categorical((8, 16, 32)), Cond("place", "pim")),
    Param("threads", IntRange(1, 4), Cond("place", "host")),
))


# smaller round budgets than the defaults: at most 64 sampler asks a round (the contract
# measures the space out in rounds of 32, whose last rounds' asks are mostly repeats) and a
# population of 16 bred for the evolutionary strategy (the task has a few hundred points)
CONTRACT_SETTINGS = SearchSettings(max_asks=64, population=16, newcomers=8)


@pytest.mark.parametrize("kind", ["tpe", "evolutionary"])  # random: OptunaSearch as tpe
class TestEveryStrategy(StrategyContract):
    @pytest.fixture
    def strategy(self, kind: str):
        return make_strategy(kind)

    @staticmethod
    def context(db: Path, runner: LocalRunner, strategy: SearchStrategy, *,
                ranked: bool = False, seed: int = 0) -> SearchContext:
        ctx = StrategyContract.context(db, runner, strategy, ranked=ranked, seed=seed)
        return dataclasses.replace(ctx, settings=CONTRACT_SETTINGS)


def test_the_registry_knows_every_strategy_and_scheduler_by_name() -> None:
    assert {make_strategy(k).name for k in STRATEGIES} == set(STRATEGIES)
    assert {make_scheduler(k).name for k in SCHEDULERS} == set(SCHEDULERS)
    with pytest.raises(SearchError, match="unknown search strategy 'grid'"):
        make_strategy("grid")


def test_crossover_takes_each_parameter_from_a_parent_where_conditions_allow() -> None:
    a = {"place": "pim", "split": 2, "tile": 32}
    b = {"place": "host", "threads": 3}
    rng = np.random.default_rng(0)
    children = [crossover(SPACE, a, b, rng) for _ in range(40)]
    assert a in children and b in children  # the condition's parameter picks the family
    for c in children:
        assert SPACE.validate(c) == []
        assert c == a or c == b  # a parameter active in one parent only comes from it
    mixed = [crossover(SPACE, a, {"place": "pim", "split": 7, "tile": 8}, rng)
             for _ in range(40)]
    assert {(c["split"], c["tile"]) for c in mixed} == {(2, 32), (2, 8), (7, 32), (7, 8)}


def test_crossover_fills_a_parameter_neither_parent_has_with_its_first_value() -> None:
    space = Space("chain", 1, (
        Param("a", Categorical((0, 1))), Param("b", Categorical((0, 1))),
        Param("c", IntRange(5, 9), Cond("b", 1)),
    ))
    rng = np.random.default_rng(1)
    kids = {tuple(sorted(crossover(space, {"a": 1, "b": 0}, {"a": 0, "b": 0}, rng).items()))
            for _ in range(20)}
    assert all(dict(k)["b"] == 0 and "c" not in dict(k) for k in kids)
    assert crossover(space, {"a": 1, "b": 1, "c": 7}, {"a": 1, "b": 1, "c": 7}, rng)["c"] == 7


def test_mutation_is_one_neighbourhood_move() -> None:
    p = {"place": "pim", "split": 2, "tile": 16}
    rng = np.random.default_rng(0)
    near = list(one_change(SPACE, p))
    seen = [mutate(SPACE, p, rng) for _ in range(60)]
    assert all(q in near for q in seen) and len({str(q) for q in seen}) > 5
    assert mutate(Space("one", 1, (Param("x", Categorical((1,))),)), {"x": 1}, rng) is None
    tight = Space("tight", 1, (Param("a", IntRange(1, 8)), Param("b", IntRange(1, 8))),
                  (Constraint("small", Var("a") * Var("b"), "<=", 8),))
    kids = [mutate(tight, {"a": 2, "b": 4}, rng) for _ in range(60)]
    assert all(tight.validate(k) == [] for k in kids)  # only moves within the constraints
    assert {(k["a"], k["b"]) for k in kids} == {(1, 4), (2, 1), (2, 2), (2, 3)}
    assert mutate(tight, {"a": 8, "b": 1}, rng) is not None


def test_parents_are_the_fastest_successes(tmp_path) -> None:
    with LocalRunner(1) as runner:
        ctx = StrategyContract.context(tmp_path / "s.db", runner, EvolutionarySearch(),
                                       ranked=True)
        ctx = dataclasses.replace(ctx, settings=SearchSettings(population=4))
        t = TaskTuner(TASK, 1, ctx)
        t.step(6)
        t.step(6)
    es = t.strategy
    lat = {m.schedule.key: m.latency_ns for m in t.measurements if m.ok}
    # the four fastest successes (points of equal latency may stand in for each other)
    assert len(es.parents) == 4 and all(k in lat for k in es.parents)
    assert sorted(lat[k] for k in es.parents) == sorted(lat.values())[:4]
