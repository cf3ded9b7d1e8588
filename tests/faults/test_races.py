"""``autosched tune`` processes started at once on one new database: the processes that
overlap share one job, every job's budget is spent once, nothing is duplicated or lost.

CI runs three processes on a new SQLite file and two on PostgreSQL (two processes on
each database also run in tests/autosched/test_search_shared.py, forked);
``AUTOSCHED_FAULTS=long`` runs two and three on both, and
``experiments/bench_distributed.py`` repeats the race 20 times per database.
"""

from __future__ import annotations

import os

import pytest

from experiments.scenarios import race

TRIALS = 24
LONG = os.environ.get("AUTOSCHED_FAULTS") == "long"
CASES = [("sqlite", 2), ("sqlite", 3), ("postgresql", 2), ("postgresql", 3)] if LONG else [
    ("sqlite", 3), ("postgresql", 2)]


@pytest.mark.parametrize("kind, n", CASES, ids=[f"{k}-{n}" for k, n in CASES])
def test_concurrent_tunes_share_one_job(kind, n, config, tmp_path, request):
    url = (f"sqlite:///{tmp_path / 'new.db'}" if kind == "sqlite"
           else request.getfixturevalue("pg_url"))
    res = race(url, n, config, tmp_path, trials=TRIALS)
    assert res.errors == []
    after = res.after
    assert after.duplicates == 0 and after.problems == []
    # every job's budget spent once. The tiny model's job takes well under a second of a
    # process's five (start-up is most of it), so a process whose start-up lags until the
    # job is done starts a new one, as a later run does; of three started at once, two
    # have overlapped in every run seen.
    # (tests/autosched/test_search_shared.py shares a job between forked processes
    # deterministically.)
    assert after.jobs and all(j == (TRIALS, TRIALS, True) for j in after.jobs)
    assert after.records == TRIALS * len(after.jobs) and res.lost == 0  # reports count own
    if n > 2:
        assert len(after.jobs) < n  # at least two of the processes shared a job
