"""Two and three ``autosched tune`` processes started at once on one new database."""

from __future__ import annotations

import pytest

from experiments.scenarios import race

TRIALS = 24


@pytest.mark.parametrize("n", [2, 3])
def test_concurrent_tunes_share_one_job(db_url, n, config, tmp_path):
    res = race(db_url, n, config, tmp_path, trials=TRIALS)
    assert res.errors == []
    after = res.after
    assert after.duplicates == 0 and after.problems == []
    assert after.records == TRIALS and res.lost == 0  # each report counts its own
    assert after.jobs == [(TRIALS, TRIALS, True)]  # one job, its budget spent once
