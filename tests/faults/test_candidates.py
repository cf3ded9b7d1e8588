"""One candidate's simulation fails, another hangs: both become failure records, the
tune completes, and a rerun measures neither again."""

from __future__ import annotations

import time

from autosched.database import SqlDatabase
from autosched.database.check import check_database
from autosched.families.registry import build, family_of
from autosched.measure import LocalRunner
from autosched.measure import base as measure_base
from autosched.search import SearchContext, tune_tasks
from autosched.search.shared import share
from search_spaces import Workload
from sim.errors import SimError
from sim.hwio import load_hardware

HW = load_hardware("aim-gddr6")
TASKS = [(Workload.make("gemv", m=1, n=64, k=256), 2), (Workload.make("gemv", m=1, n=128, k=64), 1)]


def _default_program(w: Workload):
    return build(w, family_of(w).default(w, HW), HW).program


def _tune(db: SqlDatabase, budget: int) -> int:
    job = share(db, [w for w, _ in TASKS], HW, budget)
    runner = LocalRunner(2, timeout=2.0)
    try:
        tune_tasks(TASKS, SearchContext.of(hardware=HW, database=job.database, runner=runner,
                                           trials=budget, gate=job))
        job.finish()
    finally:
        job.close()
        runner.close()
    return job.inserted


def test_a_simulator_error_and_a_hang_are_failures_and_never_repeated(tmp_path, monkeypatch):
    broken, stuck = (_default_program(w) for w, _ in TASKS)
    real = measure_base.simulate

    def faulty(program, hw):
        if program == broken:
            raise SimError("injected: the simulator rejects this program")
        if program == stuck:
            time.sleep(3600)
        return real(program, hw)

    monkeypatch.setattr(measure_base, "simulate", faulty)  # the pool's workers fork after this
    db = SqlDatabase(tmp_path / "c.db")
    assert _tune(db, 16) == 16
    failed = {m.workload.op + str(m.workload.dims["n"]): m.error for m in db.records() if not m.ok}
    assert "injected" in failed["gemv64"] and "timed out after 2 s" in failed["gemv128"]
    assert len(db) == 16 and check_database(db) == []
    assert _tune(db, 8) == 8  # a new job: more measurements, none repeated
    assert len(db) == 24 and check_database(db) == []
