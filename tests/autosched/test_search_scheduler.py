"""The task scheduler and tune_tasks: allocation, budgets, re-runs, determinism, progress."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from autosched.database import open_database
from autosched.families.registry import FAMILIES
from autosched.measure import LocalRunner
from autosched.search import Progress, SearchError, TaskScheduler, TaskTuner, tune_tasks
from cost_models.base import CostModel
from search_spaces import Workload
from sim.hwio import load_hardware
from sim.timing import simulate

try:
    from .search_fakes import FakeGemvLowering
except ImportError:
    from search_fakes import FakeGemvLowering

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


def test_more_budget_where_count_times_latency_is_larger(tmp_path: Path) -> None:
    with LocalRunner(1) as runner:
        tuners = [TaskTuner(w, n, HW, db=tmp_path / "t.db", runner=runner, seed=i)
                  for i, (w, n) in enumerate([(SMALL, 1), (BIG, 20)])]
        sched = TaskScheduler(tuners, runner, seed=0, warmup=2, batch=2)
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
    first = tune_tasks(tasks, HW, db=db, trials=20, workers=2, seed=0, batch=4)
    assert sum(r.new for r in first) == 20 == len(_keys(db))
    second = tune_tasks(tasks, HW, db=db, trials=20, workers=2, seed=0, batch=4)
    assert sum(r.new for r in second) == 20
    assert [b.measurements for b in second] == [a.measurements + b.new
                                                for a, b in zip(first, second, strict=True)]
    assert len(_keys(db)) == len(set(_keys(db))) == 40
    third = tune_tasks(tasks, HW, db=db, trials=500, workers=2, seed=0, batch=16)
    keys = _keys(db)
    assert len(keys) == len(set(keys)) == 96  # both spaces fully explored, once
    assert sum(r.new for r in third) == 56 and all(r.measurements == 48 for r in third)
    assert all(r.best is not None and r.speedup >= 1.0 for r in third)


def test_same_seed_same_db_state_same_measurements(tmp_path: Path) -> None:
    seen: list[Progress] = []
    for name in ("a", "b"):
        tune_tasks([(BIG, 4), (SMALL, 2)], HW, db=tmp_path / f"{name}.db", trials=18,
                   workers=1, seed=5, batch=3, progress=seen.append if name == "a" else None)
    assert _keys(tmp_path / "a.db") == _keys(tmp_path / "b.db")
    assert [p.used for p in seen] == sorted(p.used for p in seen) and seen[-1].used == 18
    assert sum(len(p.new) for p in seen) == 18 and all(p.budget == 18 for p in seen)


def test_tasks_are_unique_and_zero_budget(tmp_path: Path) -> None:
    res = tune_tasks([(BIG, 5)], HW, db=tmp_path / "t.db", trials=0, workers=1)
    assert len(res) == 1 and res[0].count == 5 and res[0].measurements == 0
    assert res[0].default is None and res[0].history == ()
    with pytest.raises(SearchError, match="listed twice"):  # frontend.tasks() merges, once
        tune_tasks([(BIG, 2), (BIG, 3)], HW, db=tmp_path / "t.db", trials=0, workers=1)
    with pytest.raises(SearchError, match="trials must be an int >= 0"):
        tune_tasks([(BIG, 1)], HW, db=tmp_path / "t.db", trials=-1)
    with pytest.raises(SearchError, match=r"a task is \(Workload, count >= 1\)"):
        tune_tasks([(BIG, 0)], HW, db=tmp_path / "t.db", trials=1)


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
        tuners = [TaskTuner(w, 1, HW, db=tmp_path / "t.db", runner=runner, seed=i)
                  for i, w in enumerate([BIG, SMALL])]
        # plan 0 runs BIG 20 times, plan 1 SMALL once: plan 0 can never catch up
        sched = TaskScheduler(tuners, runner, seed=0, warmup=2, batch=4,
                              plans=[{0: 20}, {1: 1}])
        sched.run(12)
    assert sched.contention() == [1] and sched.weights() == [0, 1]
    assert sched.allocated == [1, 11]


def test_gains_drive_the_budget_and_a_settled_search_stops_early(tmp_path: Path) -> None:
    with LocalRunner(1) as runner:
        model = Oracle()
        tuners = [TaskTuner(w, n, HW, db=tmp_path / "t.db", runner=runner, seed=i,
                            cost_model=model) for i, (w, n) in enumerate([(BIG, 8), (SMALL, 1)])]
        sched = TaskScheduler(tuners, runner, seed=0, batch=4, epsilon=0.0)
        results = sched.run(90)
    assert sum(sched.allocated) < 90  # every task settled before the budget ran out
    for r, t in zip(results, tuners, strict=True):
        assert r.predicted_gain_ns == 0.0 and t.noise == pytest.approx(0.01)
        assert r.search_s > 0 and r.measure_s > 0
        space_best = min(simulate(t.pool.candidate(p).program, HW).latency_ns
                         for p in t.space.enumerate() if t.pool.candidate(p) is not None)
        assert r.best.latency_ns == pytest.approx(space_best)
