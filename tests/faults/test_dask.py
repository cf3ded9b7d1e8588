"""The Dask farm under faults: a worker killed mid-measurement, a measurement that keeps
killing workers, workers and the scheduler killed during a tune."""

from __future__ import annotations

import os
import random
import signal
import time

from autosched.measure import DaskRunner, measure_one
from autosched.measure.contract import contract_inputs, dies_on
from experiments.scenarios import inspect, start_tune, tune_argv
from experiments.services import start_dask


def test_a_worker_killed_mid_measurement_has_it_retried_elsewhere(dask_cluster, tmp_path):
    inputs = list(contract_inputs())
    victim = inputs[random.Random(3).randrange(len(inputs) - 1)]
    marker = tmp_path / "died"
    with DaskRunner(dask_cluster.address, measure=dies_on(victim.schedule.key, str(marker))
                    ) as runner:
        got = runner.run(inputs)
    assert marker.exists() and got == [measure_one(i) for i in inputs]
    dask_cluster.wait_for_workers(2)


def test_a_measurement_that_kills_two_workers_is_a_failure_record(dask_cluster):
    inputs = list(contract_inputs())
    with DaskRunner(dask_cluster.address, measure=dies_on(inputs[1].schedule.key)) as runner:
        got = runner.run(inputs)
    assert not got[1].ok and "killed 2 Dask workers; not retried" in got[1].error
    assert [m.ok for m in got[:1] + got[2:-1]] == [True] * (len(inputs) - 2)
    dask_cluster.wait_for_workers(2)


def _wait_for_records(url: str, n: int, run, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and run.proc.poll() is None:
        if os.path.exists(url.removeprefix("sqlite:///")) and inspect(url).records >= n:
            return
        time.sleep(0.2)


def test_workers_and_the_scheduler_killed_during_tune(config, tmp_path):
    url, rng = f"sqlite:///{tmp_path / 'd.db'}", random.Random(7)
    cluster = start_dask(2, nanny=False)
    try:
        argv = tune_argv(config, url, trials=96, runner=cluster.address.replace("tcp", "dask"))
        run = start_tune(argv, tmp_path / "t.log")
        _wait_for_records(url, rng.randint(2, 8), run)
        os.kill(cluster.workers[0].pid, signal.SIGKILL)  # one worker dies for good
        _wait_for_records(url, rng.randint(10, 16), run)
        os.kill(cluster.scheduler.pid, signal.SIGKILL)
        run.wait(120)
    finally:
        cluster.stop()
    lines = run.stderr.strip().splitlines()
    assert run.code == 1 and len(lines) == 1 and "lost the Dask scheduler" in lines[0]
    kept = inspect(url)
    assert kept.duplicates == 0 and kept.problems == [] and kept.records >= 10
    cluster = start_dask(2)
    try:
        again = start_tune(tune_argv(config, url, trials=96,
                                     runner=cluster.address.replace("tcp", "dask")),
                           tmp_path / "t2.log").wait()
    finally:
        cluster.stop()
    after = inspect(url)
    assert again.code == 0, again.stderr
    assert kept.keys <= after.keys and after.problems == [] and after.duplicates == 0
    assert after.jobs == [(96, 96, True)]
