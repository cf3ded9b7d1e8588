"""The search makes exactly the measurements it made before its strategy interface existed.

``data/search_measurements.json`` holds, per case, the tasks, the settings and the
measured schedule keys in commit order of seeded searches on a fresh database (llama-tiny
decode: every task, the fusion plans, and a cold single-task search as the search
benchmark runs it). Same seed, same database state, same default strategy: same
measurements (the tuned export and the search benchmarks depend on it).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autosched.database import open_database
from autosched.measure import LocalRunner
from autosched.search import TaskTuner, tune_tasks
from cost_models import XGBRegressionModel, make_cost_model
from search_spaces import Workload
from sim.hwio import load_hardware

CASES = json.loads((Path(__file__).parent / "data" / "search_measurements.json")
                   .read_text())["cases"]


def _measured(db) -> list[str]:
    return [f"{m.workload.key}|{m.schedule.key}" for m in db.records()]


@pytest.mark.parametrize("name", sorted(CASES))
def test_same_seed_same_measurements_as_recorded(name: str, tmp_path: Path) -> None:
    case = CASES[name]
    hw = load_hardware(case["hw"])
    tasks = [(Workload.from_dict(w), n) for w, n in case["tasks"]]
    db = open_database(tmp_path / "t.db")
    seed = case["seed"]
    if case["kind"] == "tune_tasks":
        model = None if case["cost_model"] == "none" else make_cost_model(case["cost_model"],
                                                                          seed=seed)
        tune_tasks(tasks, hw, db=db, trials=case["trials"], workers=1,
                   sampler=case["strategy"], seed=seed, cost_model=model, plans=case["plans"])
    else:  # a cold single-task search in rounds of 8, as experiments/bench_search runs it
        model = XGBRegressionModel(seed=seed, nthread=1) if case["cost_model"] != "none" \
            else None
        with LocalRunner(1) as runner:
            t = TaskTuner(tasks[0][0], 1, hw, db=db, runner=runner, sampler=case["strategy"],
                          seed=seed, cost_model=model, start_from_default=False)
            while t.measured < case["trials"] and t.step(min(8, case["trials"] - t.measured)):
                pass
    assert _measured(db) == case["measured"]
