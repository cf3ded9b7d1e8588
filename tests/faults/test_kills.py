"""kill -9 of a tune process (and its pool workers) at random points, then a rerun.

By default the first process is killed at a random time of its start and the second once
the database holds a random number of its records (mid-measurement); the final run must
resume that one job to its whole budget. ``AUTOSCHED_FAULTS=long`` kills ten processes in
a row at random times instead.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import sqlite3
import time
from pathlib import Path

from autosched.cli import main
from experiments.scenarios import Inspection, Run, inspect, kill_loop, start_tune, tune_argv

TRIALS = 40
LONG = os.environ.get("AUTOSCHED_FAULTS") == "long"


def _records(path: Path) -> int:
    """Records in the SQLite file at ``path`` (0 while it or its schema does not exist),
    read without creating or changing anything."""
    try:
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True,
                                                timeout=1.0)) as c:
            return int(c.execute("SELECT count(*) FROM measurements").fetchone()[0])
    except sqlite3.Error:
        return 0


def _kill_at(path: Path, n: int, run: Run, timeout: float = 180) -> bool:
    """kill -9 of ``run`` (and its workers) once the database holds ``n`` records; True
    when the process was still running then, False when it ended or ``timeout`` passed."""
    deadline = time.monotonic() + timeout
    while run.proc.poll() is None and time.monotonic() < deadline:
        if _records(path) >= n:
            landed = run.proc.poll() is None
            run.kill()
            return landed
        time.sleep(0.02)
    run.kill()
    return False


def _killed_twice(path: Path, url: str, config: Path, folder: Path,
                  seed: int) -> tuple[bool, set, Run, Inspection]:
    """A process killed at a random time of its start (2 to 9 s), the next once it has
    committed a random 1 to TRIALS/4 records (mid-job); then a run to completion. Returns
    whether the second kill landed mid-job, the records seen after the kills, the final
    run and the database after it."""
    rng = random.Random(seed)
    first = start_tune(tune_argv(config, url, trials=TRIALS, workers=2), folder / "k0.log")
    time.sleep(rng.uniform(2.0, 9.0))
    first.kill()
    run = start_tune(tune_argv(config, url, trials=TRIALS, workers=2), folder / "k1.log")
    landed = _kill_at(path, _records(path) + rng.randint(1, TRIALS // 4), run)
    seen = inspect(url).keys
    final = start_tune(tune_argv(config, url, trials=TRIALS, workers=2,
                                 report=folder / "final.json"), folder / "final.log",
                       folder / "final.json").wait()
    return landed, seen, final, inspect(url)


def test_killed_tunes_resume_to_the_whole_budget(config, tmp_path):
    path = tmp_path / "k.db"
    url = f"sqlite:///{path}"
    if LONG:
        res = kill_loop(url, config, tmp_path, kills=10, trials=TRIALS, seed=1,
                        window=(2.0, 9.0))
        final, after, before_final, lost = res.final, res.after, res.before_final, res.lost
        assert all(committed == budget for budget, committed, done in after.jobs if done)
        assert after.jobs[-1][2] and after.records == sum(c for _, c, _ in after.jobs)
    else:
        landed, seen, final, after = _killed_twice(path, url, config, tmp_path, seed=1)
        before_final, lost = len(seen), len(seen - after.keys)
        assert landed and 0 < before_final < TRIALS  # the second kill landed mid-job
        assert after.jobs == [(TRIALS, TRIALS, True)]  # the killed job, resumed
    assert final.code == 0, final.stderr
    assert lost == 0 and after.duplicates == 0 and after.problems == []
    report = json.loads((tmp_path / "final.json").read_text())
    assert report["measurements"] == after.records - before_final and report["tasks"]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["run", "--model", str(config), "--db", url, "--check", "--steps", "2"])
    check = out.getvalue()
    assert code == 0 and "PASS" in check
    assert "schedules from" in check  # what the resumed tune stored is read back
