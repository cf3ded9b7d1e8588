"""Tuning processes sharing one job: the budget split, nothing measured twice, each run
counting its own records, the Optuna studies mirrored into the same database."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import time

import optuna

from autosched.database import RecordKey, SqlDatabase
from autosched.database.check import check_database
from autosched.measure import LocalRunner
from autosched.search import SearchContext, TaskTuner, tune_tasks
from autosched.search.mirror import study_name
from autosched.search.shared import Solo, share
from search_spaces import Workload
from sim import SIM_VERSION
from sim.hwio import load_hardware

HW = load_hardware("hbm-pim")
TASKS = [(Workload.make("gemv", m=1, n=64, k=256), 4), (Workload.make("gemv", m=1, n=128, k=64), 2),
         (Workload.make("gemv", m=1, n=256, k=128), 2),
         (Workload.make("attention", b=1, q=1, h=2, kvh=1, d=16, l=32), 1)]
WORKLOADS = [w for w, _ in TASKS]


def _tune(url: str, budget: int, seed: int, out) -> None:
    db = SqlDatabase(url)
    job = share(db, WORKLOADS, HW, budget)
    try:
        with LocalRunner(1) as runner:
            tune_tasks(TASKS, SearchContext.of(hardware=HW, database=job.database,
                                               runner=runner, trials=budget, seed=seed,
                                               gate=job, batch=4))
    finally:
        job.close()
    out.put((job.inserted, job.measured))


def _run_together(url: str, budget: int, n: int) -> list[tuple[int, int]]:
    ctx = mp.get_context("fork")
    out = ctx.Queue()
    procs = [ctx.Process(target=_tune, args=(url, budget, i, out)) for i in range(n)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(300)
        assert p.exitcode == 0
    return [out.get(timeout=5) for _ in procs]


def test_two_processes_spend_one_budget_and_measure_nothing_twice(db_url):
    url = db_url
    counts = _run_together(url, 24, 2)
    db = SqlDatabase(url)
    assert len(db) == 24 and sum(i for i, _ in counts) == 24
    assert all(inserted == measured for inserted, measured in counts)
    assert check_database(db) == []
    storage = optuna.storages.RDBStorage(url)
    ctx = SearchContext.of(hardware=HW, database=db, runner=LocalRunner(1), trials=0)
    for w in WORKLOADS:  # every task's study holds exactly its measured schedules
        tuner = TaskTuner(w, 1, ctx)
        trials = optuna.load_study(study_name=study_name(tuner), storage=storage).trials
        key = RecordKey(w, HW.fingerprint, tuner.space.name, tuner.space.version, SIM_VERSION)
        assert sorted(t.user_attrs["schedule"] for t in trials) == \
            sorted(m.schedule.key for m in db.records(key))


def test_a_killed_process_s_share_is_taken_over_and_the_job_completed(tmp_path):
    url = f"sqlite:///{tmp_path / 'k.db'}"
    ctx = mp.get_context("fork")
    out = ctx.Queue()
    victim = ctx.Process(target=_tune, args=(url, 40, 0, out))
    victim.start()
    db = SqlDatabase(url)
    deadline = time.monotonic() + 120
    while len(db) < 6 and time.monotonic() < deadline:
        time.sleep(0.05)
    os.kill(victim.pid, signal.SIGKILL)  # mid-job, holding a lease and a reservation
    victim.join()
    kept = {(m.workload.key, m.schedule.key) for m in db.records()}
    (inserted, measured), = _run_together(url, 40, 1)
    assert len(db) == 40 and inserted == measured == 40 - len(kept)
    assert kept <= {(m.workload.key, m.schedule.key) for m in db.records()}
    assert check_database(db) == []


def test_alone_every_grant_is_granted_and_commits_are_counted(tmp_path):
    gate = Solo(SqlDatabase(tmp_path / "solo.db"))
    with LocalRunner(1) as runner:
        tune_tasks(TASKS[:1], SearchContext.of(hardware=HW, database=gate.database,
                                               runner=runner, trials=5, gate=gate))
    assert gate.inserted == gate.measured == 5
