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
from autosched.search import SearchContext, TaskTuner, tune_tasks
from cost_models import XGBRegressionModel
from search_spaces import Workload
from sim.hwio import load_hardware

CASES = json.loads((Path(__file__).parent / "data" / "search_measurements.json")
                   .read_text())["cases"]


def _measured(db) -> list[str]:
    return [f"{m.workload.key}|{m.schedule.key}" for m in db.records()]


def _search(case: dict, tmp_path: Path) -> list[str]:
    """The measurements of ``case``'s seeded search on a fresh database in ``tmp_path``."""
    hw = load_hardware(case["hw"])
    tasks = [(Workload.from_dict(w), n) for w, n in case["tasks"]]
    db = open_database(tmp_path / "t.db")
    seed, cm = case["seed"], case["cost_model"]
    with LocalRunner(1) as runner:
        if case["kind"] == "tune_tasks":
            ctx = SearchContext.of(hardware=hw, database=db, runner=runner,
                                   trials=case["trials"], strategy=case["strategy"],
                                   cost_model=cm, seed=seed, plans=case["plans"])
            tune_tasks(tasks, ctx)
        else:  # a cold single-task search in rounds of 8, as experiments/bench_search runs it
            model = XGBRegressionModel(seed=seed, nthread=1) if cm != "none" else None
            ctx = SearchContext.of(hardware=hw, database=db, runner=runner,
                                   trials=case["trials"], strategy=case["strategy"],
                                   cost_model=model, seed=seed)
            t = TaskTuner(tasks[0][0], 1, ctx, start_from_default=False)
            while t.measured < ctx.trials and t.step(min(8, ctx.trials - t.measured)):
                pass
    return _measured(db)


@pytest.mark.parametrize("name", sorted(CASES))
def test_same_seed_same_measurements_as_recorded(name: str, tmp_path: Path) -> None:
    assert _search(CASES[name], tmp_path) == CASES[name]["measured"]


if __name__ == "__main__":  # re-record after an intended change of the search or a space
    import sys
    import tempfile

    DATA = Path(__file__).parent / "data" / "search_measurements.json"
    data = json.loads(DATA.read_text())
    for case in data["cases"].values():
        with tempfile.TemporaryDirectory() as tmp:
            case["measured"] = _search(case, Path(tmp))
    data["about"] = sys.argv[1] if len(sys.argv) > 1 else data["about"]
    DATA.write_text(json.dumps(data, indent=1) + "\n")
