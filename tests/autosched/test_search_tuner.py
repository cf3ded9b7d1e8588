"""The per-task tuner: default first, resume without re-measuring, failures as data, seeds,
strategies and objectives, and the cost-model hook."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from optuna.trial import TrialState

from autosched.database import open_database
from autosched.families.registry import FAMILIES
from autosched.measure import LocalRunner
from autosched.search import STRATEGIES, SearchError, TaskTuner
from cost_models.base import CostModel
from search_spaces import Workload
from sim.hwio import load_hardware

try:
    from .search_fakes import FakeGemvLowering, context
except ImportError:
    from search_fakes import FakeGemvLowering, context

W = Workload.make("gemv", m=1, n=64, k=256)
HW = load_hardware("aim-gddr6")  # 3 modes x 3 splits x 2 x 2 x 2 = 72 points


@pytest.fixture(autouse=True)
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeGemvLowering:
    low = FakeGemvLowering(fail=lambda p: p["k_split"] == 2 and p["loop_order"] == "tile_outer")
    monkeypatch.setitem(FAMILIES, "gemv", low)
    return low


@pytest.fixture
def runner():
    with LocalRunner(1) as r:
        yield r


def _tuner(db, runner, *, sampler="tpe", start_from_default=True, **kw) -> TaskTuner:
    ctx = context(HW, db, runner, strategy=sampler, **{"seed": 0, **kw})
    return TaskTuner(W, 1, ctx, start_from_default=start_from_default)


def _keys(db) -> list[str]:
    return [m.schedule.key for m in open_database(db).records()]


def test_default_first_then_distinct(tmp_path: Path, runner: LocalRunner) -> None:
    t = _tuner(tmp_path / "t.db", runner)
    first = t.step(4)
    assert first[0].schedule == t.default and t.default_measurement == first[0]
    t.step(6)
    keys = _keys(tmp_path / "t.db")
    assert len(keys) == len(set(keys)) == t.measured == 10
    assert t.history == sorted(t.history, reverse=True) and t.history[-1] == t.best.latency_ns


def test_cold_start_does_not_enqueue_the_default(tmp_path: Path, runner: LocalRunner) -> None:
    t = _tuner(tmp_path / "t.db", runner, start_from_default=False, sampler="random", seed=5)
    assert not t.strategy.study.get_trials()  # nothing enqueued
    first = t.step(3)
    assert len(first) == 3 and t.default_measurement is None


def test_resume_measures_nothing_twice(tmp_path: Path, runner: LocalRunner) -> None:
    db = tmp_path / "t.db"
    t = _tuner(db, runner)
    t.step(5)
    t.step(5)
    del t  # an interrupted run
    t2 = _tuner(db, runner)
    assert t2.measured == 10 and len(t2.strategy.study.trials) == 10
    assert t2.history[-1] == min(m.latency_ns for m in open_database(db).records() if m.ok)
    new = t2.step(5)
    assert new[0].schedule != t2.default  # already measured: not enqueued again
    keys = _keys(db)
    assert len(keys) == len(set(keys)) == 15
    done = [t for t in t2.strategy.study.trials if t.state in (TrialState.COMPLETE, TrialState.FAIL)
            and not t.user_attrs.get("skip")]
    assert len(done) == 15  # the study continued from the told history


def test_failures_are_recorded_and_the_run_goes_on(tmp_path: Path, runner: LocalRunner,
                                                  fake: FakeGemvLowering) -> None:
    db = tmp_path / "t.db"
    t = _tuner(db, runner, sampler="random")
    while t.step(16):
        pass
    size = t.space.size()
    assert t.exhausted and t.measured == size == 72 and t.step(4) == []
    recs = open_database(db).records()
    refused = [m for m in recs if "fake lowering refuses" in m.error]
    assert len(refused) == 12  # k_split=2, tile_outer: 3 modes x 2 x 2
    assert all(m.schedule.point["k_split"] == 2 for m in refused)
    failed = [tr for tr in t.strategy.study.trials if tr.user_attrs.get("error")]
    assert len(failed) == sum(not m.ok for m in recs)
    assert all(tr.state == TrialState.FAIL for tr in failed)
    assert t.best.ok


def test_same_seed_same_measurements(tmp_path: Path, runner: LocalRunner) -> None:
    runs = {}
    for name, seed in (("a", 3), ("b", 3), ("c", 4)):
        t = _tuner(tmp_path / f"{name}.db", runner, seed=seed)
        t.step(6)
        t.step(6)
        runs[name] = _keys(tmp_path / f"{name}.db")
    assert runs["a"] == runs["b"]
    assert runs["a"] != runs["c"]


@pytest.mark.parametrize("sampler", STRATEGIES)
def test_every_strategy_runs(tmp_path: Path, runner: LocalRunner, sampler: str) -> None:
    t = _tuner(tmp_path / "t.db", runner, sampler=sampler)
    t.step(4)
    t.step(4)
    assert t.measured == 8 and len(set(_keys(tmp_path / "t.db"))) == 8


@pytest.mark.parametrize("sampler", ["nsga2", "tpe"])
def test_multi_objective_pareto(tmp_path: Path, runner: LocalRunner, sampler: str) -> None:
    t = _tuner(tmp_path / "t.db", runner, sampler=sampler, multi_objective=True)
    t.step(8)
    t.step(8)
    front = t.pareto()
    assert front and front[0].latency_ns == t.best.latency_ns
    ok = [m for m in t.measurements if m.ok]
    for f in front:
        assert not any(m.latency_ns <= f.latency_ns and m.energy_pj < f.energy_pj or
                       m.latency_ns < f.latency_ns and m.energy_pj <= f.energy_pj for m in ok)
    assert all(len(tr.values) == 2 for tr in t.strategy.study.trials
               if tr.state == TrialState.COMPLETE)


def test_bad_configuration(tmp_path: Path, runner: LocalRunner) -> None:
    with pytest.raises(SearchError, match="cmaes sampler optimises one objective"):
        _tuner(tmp_path / "t.db", runner, sampler="cmaes", multi_objective=True)
    with pytest.raises(SearchError, match="evolutionary strategy optimises latency alone"):
        _tuner(tmp_path / "t.db", runner, sampler="evolutionary", multi_objective=True)
    with pytest.raises(SearchError, match="unknown search strategy 'annealing'"):
        _tuner(tmp_path / "t.db", runner, sampler="annealing")
    with pytest.raises(SearchError, match="n_measure >= 1"):
        _tuner(tmp_path / "t.db", runner).step(0)


def test_rdb_storage_resumes_the_same_study(tmp_path: Path, runner: LocalRunner) -> None:
    url = f"sqlite:///{tmp_path / 'optuna.db'}"
    _tuner(tmp_path / "t.db", runner, storage=url).step(4)
    t2 = _tuner(tmp_path / "t.db", runner, storage=url)
    told = [tr for tr in t2.strategy.study.trials if not tr.user_attrs.get("skip")
            and tr.state != TrialState.WAITING]
    assert len(told) == 4 and t2.measured == 4  # not added a second time
    t2.step(4)
    assert len(set(_keys(tmp_path / "t.db"))) == 8


class PreferLane(CostModel):
    """Scores mode=lane 0 and everything else 1; remembers what it was fitted on."""

    name = "prefer-lane"

    def __init__(self) -> None:
        self.fits: list[int] = []

    def fit(self, candidates, latencies_ns) -> None:
        assert len(candidates) == len(latencies_ns)
        assert all(c.program.streams for c in candidates)
        self.fits.append(len(candidates))

    def predict(self, candidates) -> np.ndarray:
        return np.array([0.0 if c.point_dict["mode"] == "lane" else 1.0 for c in candidates])

    def save(self, path) -> None:
        Path(path).write_text(self.name)

    @classmethod
    def load(cls, path) -> PreferLane:
        return cls()


def test_cost_model_ranks_candidates(tmp_path: Path, runner: LocalRunner) -> None:
    model = PreferLane()
    t = _tuner(tmp_path / "t.db", runner, cost_model=model, sampler="random")
    first = t.step(6, n_explore=0)
    assert first[0].schedule == t.default  # the default is always measured first
    assert all(m.schedule.point["mode"] == "lane" for m in first[1:])
    assert model.fits == [6]
    second = t.step(6, n_explore=2)
    assert sum(m.schedule.point["mode"] == "lane" for m in second) >= 4
    assert model.fits == [6, 12]
    t2 = _tuner(tmp_path / "t.db", runner, cost_model=PreferLane())
    assert len(t2.training) == 12  # resumed measurements become training data
    unselected = [tr for tr in t.strategy.study.trials
                  if tr.user_attrs.get("skip") == "unselected"]
    assert unselected and all(tr.state == TrialState.FAIL for tr in unselected)
