"""The disk fills up during a commit (a file-size quota on the tune process): one line,
nothing committed lost, the database sound, and a rerun completes the job."""

from __future__ import annotations

import os

from autosched.database import SqlDatabase
from autosched.search.mirror import open_storage
from experiments.scenarios import inspect, start_tune, tune_argv

TRIALS = 40


def test_a_full_disk_during_commit(config, tmp_path):
    url = f"sqlite:///{tmp_path / 'f.db'}"
    SqlDatabase(url).close()  # the schema and Optuna's tables exist: the quota hits commits
    open_storage(url).engine.dispose()
    quota = os.path.getsize(tmp_path / "f.db") + 640 * 1024  # WAL for a few commits
    run = start_tune(tune_argv(config, url, trials=TRIALS), tmp_path / "q.log",
                     fsize_limit=quota).wait()
    lines = run.stderr.strip().splitlines()
    assert run.code == 2 and len(lines) == 1 and "everything committed before is kept" in lines[0]
    kept = inspect(url)
    assert kept.problems == [] and kept.duplicates == 0 and 0 < kept.records < TRIALS
    again = start_tune(tune_argv(config, url, trials=TRIALS), tmp_path / "a.log").wait()
    assert again.code == 0, again.stderr
    after = inspect(url)
    assert kept.keys <= after.keys and after.problems == [] and after.duplicates == 0
    assert after.jobs == [(TRIALS, TRIALS, True)]  # the interrupted job, resumed
