"""The task scheduler and tune_tasks: allocation, budgets, re-runs, determinism, progress."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from autosched.database import open_database
from autosched.families.registry import FAMILIES
from autosched.measure import LocalRunner
from autosched.search import (
    GainScheduler,
    Progress,
    RoundRobinScheduler,
    SearchError,
    SearchSettings,
    TaskTuner,
    tune_tasks,
)
from cost_models.base import CostModel
from search_spaces import Workload
from sim.hwio import load_hardware
from sim.timing import simulate

try:
    from .search_fakes import FakeGemvLowering, context
except ImportError:
    from search_fakes import FakeGemvLowering, context

HW = load_hardware("hbm-pim")  # 2 modes x 3 splits x 2 x 2 x 2 = 48 points per task
BIG = Workload.make("gemv", m=1, n=64, k=512)
SMALL = Workload.make("gemv", m=1, n=16, k=64)


@pytest.fixture(autouse=True)
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeGemvLowering:
    low = FakeGemvLowering()
    monkeypatch.setitem(FAMILIES, "gemv", low)
    return low


def _keys(db: Path) -> list[str]:
    return [f"{m.workload.key}|{m.schedule.key}" for m in open_database(db).records()]


def _tune(tasks, db: Path, trials: int, workers: int, **kw) -> list:
    with LocalRunner(workers) as runner:
        return tune_tasks(tasks, context(HW, db, runner, trials=trials, **kw))


def test_more_budget_where_count_times_latency_is_larger(tmp_path: Path) -> None:
    with LocalRunner(1) as runner:
        ctx = context(HW, tmp_path / "t.db", runner, seed=0, warmup=2, batch=2)
        tuners = [TaskTuner(w, n, ctx, seed=i)
                  for i, (w, n) in enumerate([(SMALL, 1), (BIG, 20)])]
        sched = GainScheduler(tuners, ctx)
        results = sched.run(30)
    small, big = sched.allocated
    assert small + big == 30 and big > 2 * small >= 4  # warm-up gave each task its share
    assert sched.score(1) > sched.score(0)
    assert [r.new for r in results] == sched.allocated
    assert all(r.default is not None and r.default.schedule == t.default
               for r, t in zip(results, tuners, strict=True))


def test_rerun_never_measures_twice_and_stops_when_exhausted(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    tasks = [(BIG, 4), (SMALL, 1)]
    first = _tune(tasks, db, trials=20, workers=2, seed=0, batch=4)
    assert sum(r.new for r in first) == 20 == len(_keys(db))
    second = _tune(tasks, db, trials=20, workers=2, seed=0, batch=4)
    assert sum(r.new for r in second) == 20
    assert [b.measurements for b in second] == [a.measurements + b.new
                                                for a, b in zip(first, second, strict=True)]
    assert len(_keys(db)) == len(set(_keys(db))) == 40
    third = _tune(tasks, db, trials=500, workers=2, seed=0, batch=16)
    keys = _keys(db)
    assert len(keys) == len(set(keys)) == 96  # both spaces fully explored, once
    assert sum(r.new for r in third) == 56 and all(r.measurements == 48 for r in third)
    assert all(r.best is not None and r.speedup >= 1.0 for r in third)


def test_same_seed_same_db_state_same_measurements(tmp_path: Path) -> None:
    seen: list[Progress] = []
    for name in ("a", "b"):
        _tune([(BIG, 4), (SMALL, 2)], tmp_path / f"{name}.db", trials=18, workers=1, seed=5,
              batch=3, progress=seen.append if name == "a" else None)
    assert _keys(tmp_path / "a.db") == _keys(tmp_path / "b.db")
    assert [p.used for p in seen] == sorted(p.used for p in seen) and seen[-1].used == 18
    assert sum(len(p.new) for p in seen) == 18 and all(p.budget == 18 for p in seen)


def test_tasks_are_unique_and_zero_budget(tmp_path: Path) -> None:
    res = _tune([(BIG, 5)], tmp_path / "t.db", trials=0, workers=1)
    assert len(res) == 1 and res[0].count == 5 and res[0].measurements == 0
    assert res[0].default is None and res[0].history == ()
    with pytest.raises(SearchError, match="listed twice"):  # frontend.tasks() merges, once
        _tune([(BIG, 2), (BIG, 3)], tmp_path / "t.db", trials=0, workers=1)
    with pytest.raises(SearchError, match="trials must be an int >= 0"):
        _tune([(BIG, 1)], tmp_path / "t.db", trials=-1, workers=1)
    with pytest.raises(SearchError, match=r"a task is \(Workload, count >= 1\)"):
        _tune([(BIG, 0)], tmp_path / "t.db", trials=1, workers=1)


class Oracle(CostModel):
    """Predicts the simulated log2 latency exactly: a model with no noise."""

    name = "oracle"

    def fit(self, candidates, latencies_ns) -> None:
        pass

    def predict(self, candidates) -> np.ndarray:
        return np.log2([simulate(c.program, c.hw).latency_ns for c in candidates])

    def latency_ns(self, scores: np.ndarray) -> np.ndarray:
        return np.exp2(scores)

    def save(self, path) -> None:
        raise NotImplementedError

    @classmethod
    def load(cls, path) -> Oracle:
        raise NotImplementedError


def test_plans_out_of_contention_get_nothing_past_their_default(tmp_path: Path) -> None:
    with LocalRunner(1) as runner:
        # plan 0 runs BIG 20 times, plan 1 SMALL once: plan 0 can never catch up
        ctx = context(HW, tmp_path / "t.db", runner, seed=0, warmup=2, batch=4,
                      plans=[{BIG.key: 20}, {SMALL.key: 1}])
        tuners = [TaskTuner(w, 1, ctx, seed=i) for i, w in enumerate([BIG, SMALL])]
        sched = GainScheduler(tuners, ctx)
        sched.run(12)
    assert sched.contention() == [1] and sched.weights() == [0, 1]
    assert sched.allocated == [1, 11]


def test_gains_drive_the_budget_and_a_settled_search_stops_early(tmp_path: Path) -> None:
    with LocalRunner(1) as runner:
        ctx = context(HW, tmp_path / "t.db", runner, seed=0, batch=4, cost_model=Oracle(),
                      settings=SearchSettings(epsilon=0.0))
        tuners = [TaskTuner(w, n, ctx, seed=i) for i, (w, n) in enumerate([(BIG, 8), (SMALL, 1)])]
        sched = GainScheduler(tuners, ctx)
        results = sched.run(90)
    assert sum(sched.allocated) < 90  # every task settled before the budget ran out
    for r, t in zip(results, tuners, strict=True):
        assert r.predicted_gain_ns == 0.0 and t.noise == pytest.approx(0.01)
        assert r.search_s > 0 and r.measure_s > 0
        space_best = min(simulate(t.pool.candidate(p).program, HW).latency_ns
                         for p in t.space.enumerate() if t.pool.candidate(p) is not None)
        assert r.best.latency_ns == pytest.approx(space_best)


def test_round_robin_gives_every_live_task_its_turn(tmp_path: Path) -> None:
    with LocalRunner(1) as runner:
        ctx = context(HW, tmp_path / "t.db", runner, seed=0, warmup=1, batch=2,
                      scheduler="round-robin")
        tuners = [TaskTuner(w, n, ctx, seed=i) for i, (w, n) in enumerate([(SMALL, 1), (BIG, 20)])]
        sched = ctx.scheduler(tuners, ctx)
        assert isinstance(sched, RoundRobinScheduler)
        sched.run(21)
    # the defaults first, then rounds of 2 in turn, whatever the counts: 1 + 10, 1 + 9
    assert sched.allocated == [11, 10]
    with pytest.raises(SearchError, match="unknown task scheduler 'fifo'"):
        context(HW, tmp_path / "t.db", runner, scheduler="fifo")
