"""kill -9 of a tune process (and its pool workers) at random points, then a rerun."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from experiments.scenarios import kill_loop

TRIALS = 40


def test_killed_tunes_resume_to_the_whole_budget(config, tmp_path):
    url = f"sqlite:///{tmp_path / 'k.db'}"
    kills = 10 if os.environ.get("AUTOSCHED_FAULTS") == "long" else 2
    res = kill_loop(url, config, tmp_path, kills=kills, trials=TRIALS, seed=1,
                    window=(2.0, 9.0))
    assert res.final.code == 0, res.final.stderr
    after = res.after
    assert res.lost == 0 and after.duplicates == 0 and after.problems == []
    assert all(committed == budget for budget, committed, done in after.jobs if done)
    assert after.jobs[-1][2] and after.records == sum(c for _, c, _ in after.jobs)
    report = json.loads((tmp_path / "final.json").read_text())
    assert report["measurements"] == after.records - res.before_final and report["tasks"]
    check = subprocess.run([sys.executable, "-m", "autosched", "run", "--model", str(config),
                            "--db", url, "--check", "--steps", "2"], capture_output=True,
                           text=True, timeout=300)
    assert check.returncode == 0 and "PASS" in check.stdout
    assert "schedules from" in check.stdout and " exact " in check.stdout
