"""The contract every :class:`SearchStrategy` passes, as a pytest suite to subclass.

    class TestMyStrategy(StrategyContract):
        @pytest.fixture
        def strategy(self):
            return MyStrategy(...)

The fixture returns a new unbound strategy. The suite tunes a small real attention task
(its space has 70 points on hbm-pim) in process, with and without a cost model
(the analytical bound, cheap and deterministic). Importing this module needs pytest.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cost_models.registry import make_cost_model
from search_spaces import Workload
from sim.hwio import load_hardware

from ..database import open_database
from ..measure import LocalRunner
from .context import SearchContext
from .errors import SearchError
from .strategy import SearchStrategy
from .tuner import TaskTuner

__all__ = ["StrategyContract"]

TASK = Workload.make("attention", b=1, q=1, h=1, kvh=1, d=16, l=16)


class StrategyContract:
    """Binding, proposals, determinism, resuming and exhaustion; see the module doc."""

    @pytest.fixture
    def strategy(self) -> SearchStrategy:
        raise NotImplementedError("return a new unbound strategy")

    @pytest.fixture
    def runner(self):
        with LocalRunner(1) as r:  # one worker: measures in this process
            yield r

    @staticmethod
    def context(db: Path, runner: LocalRunner, strategy: SearchStrategy, *,
                ranked: bool = False, seed: int = 0) -> SearchContext:
        return SearchContext.of(hardware=load_hardware("hbm-pim"), database=open_database(db),
                                runner=runner, trials=0, strategy=strategy, seed=seed,
                                cost_model=make_cost_model("bound") if ranked else None)

    def test_each_task_binds_its_own_clone(self, strategy, runner, tmp_path) -> None:
        ctx = self.context(tmp_path / "s.db", runner, strategy)
        clone = strategy.clone()
        assert type(clone) is type(strategy) and clone is not strategy
        a, b = TaskTuner(TASK, 1, ctx), TaskTuner(TASK, 1, ctx)
        assert a.strategy is not b.strategy and strategy not in (a.strategy, b.strategy)
        with pytest.raises(SearchError, match="already serves a task"):
            a.strategy.bind(b)

    @pytest.mark.parametrize("ranked", [False, True])
    def test_proposals_are_pending_valid_unmeasured_distinct_named_first(
            self, strategy, runner, tmp_path, ranked: bool) -> None:
        t = TaskTuner(TASK, 1, self.context(tmp_path / "s.db", runner, strategy, ranked=ranked))
        t.step(3)
        points = t.strategy.propose(5)
        keys = [t.pool.key(p) for p in points]
        assert len(points) >= 5 and len(set(keys)) == len(keys)
        assert set(keys) == set(t.pool.pending)
        assert not set(keys) & set(t.measured_keys)
        assert all(t.space.validate(p) == [] for p in points)
        if ranked:  # lowered, for the model to rank
            assert all(t.pool.pending[k].candidate is not None for k in keys)
        t.pool.drop(keys)
        t.strategy.update([])  # none of them measured
        fresh = TaskTuner(TASK, 1, self.context(tmp_path / "f.db", runner, strategy.clone(),
                                                ranked=ranked))
        assert t.pool.key(fresh.strategy.propose(1)[0]) == fresh.default.key

    @pytest.mark.parametrize("ranked", [False, True])
    def test_same_seed_same_measurements(self, strategy, runner, tmp_path,
                                         ranked: bool) -> None:
        runs = []
        for name, seed in (("a", 3), ("b", 3), ("c", 4)):
            ctx = self.context(tmp_path / f"{name}.db", runner, strategy, ranked=ranked,
                               seed=seed)
            t = TaskTuner(TASK, 1, ctx, start_from_default=False)
            for _ in range(3):
                t.step(5)
            runs.append([m.schedule.key for m in ctx.database.records()])
        assert runs[0] == runs[1] and runs[0] != runs[2] and len(runs[0]) == 15

    def test_resumes_without_measuring_twice(self, strategy, runner, tmp_path) -> None:
        ctx = self.context(tmp_path / "s.db", runner, strategy, ranked=True)
        first = TaskTuner(TASK, 1, ctx)
        first.step(6)
        again = TaskTuner(TASK, 1, ctx)  # a new run on the same database
        assert again.measured == 6 and again.named_due == []
        new = again.step(6)
        keys = [m.schedule.key for m in ctx.database.records()]
        assert len(new) == 6 and len(keys) == len(set(keys)) == 12

    def test_measures_out_the_space_once_then_stops(self, strategy, runner, tmp_path) -> None:
        t = TaskTuner(TASK, 1, self.context(tmp_path / "s.db", runner, strategy))
        while t.step(32):
            pass
        valid = [p for p in t.space.enumerate() if t.pool.candidate(p) is not None]
        keys = [m.schedule.key for m in t.measurements]
        assert t.exhausted and len(keys) == len(set(keys)) == len(valid) > 50
        assert t.step(4) == []
