"""The shared training set: the head start from other tasks' stored measurements."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from autosched.database import open_database
from autosched.measure import LocalRunner
from autosched.search import TaskTuner, tune_tasks
from autosched.search.training import TrainingSet, known_hardware
from cost_models import XGBRegressionModel
from search_spaces import Workload
from sim.hwio import load_hardware

try:
    from .search_fakes import context
except ImportError:
    from search_fakes import context

A = Workload.make("gemv", m=1, n=64, k=256)
B = Workload.make("gemv", m=1, n=128, k=128)
HW = load_hardware("aim-gddr6")


def _fill(db_path: Path) -> None:
    with LocalRunner(1) as runner:
        ctx = context(HW, db_path, runner, seed=0)
        TaskTuner(A, 1, ctx).step(5)
        TaskTuner(B, 1, ctx).step(3)


def test_history_adds_other_tasks_newest_first(tmp_path: Path) -> None:
    _fill(tmp_path / "t.db")
    db = open_database(tmp_path / "t.db")
    ts = TrainingSet()
    added = ts.add_history(db, known_hardware(HW), skip={f"{B.key}@{HW.fingerprint}"},
                           limit=512)
    assert added == len(ts) == 5 and {c.workload for c in ts.candidates} == {A}
    stored = {m.schedule.key: m.latency_ns for m in db.records(workload=A)}
    assert sorted(ts.latencies_ns) == sorted(stored.values())
    newest = TrainingSet()
    assert newest.add_history(db, known_hardware(HW), skip=set(), limit=2) == 2
    assert {c.workload for c in newest.candidates} == {B}  # the newest records come first
    assert TrainingSet().add_history(db, {}, skip=set(), limit=512) == 0  # hardware unknown


def test_tune_starts_the_model_from_other_tasks(tmp_path: Path) -> None:
    _fill(tmp_path / "t.db")
    model = XGBRegressionModel(seed=0, n_estimators=10)
    fits: list[int] = []
    fit = model.fit
    model.fit = lambda c, lat: (fits.append(len(c)), fit(c, lat))  # type: ignore[method-assign]
    with LocalRunner(1) as runner:
        tune_tasks([(Workload.make("gemv", m=1, n=64, k=128), 1)],
                   context(HW, tmp_path / "t.db", runner, trials=4, cost_model=model))
    assert fits[0] == 8  # before any measurement of its own: A's 5 and B's 3
    assert fits[-1] > 8 and np.isfinite(model.predict_features(np.zeros((1, 73)))).all()
