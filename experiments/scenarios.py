"""Fault scenarios on real ``autosched tune`` processes, shared by the fault suite (a few
repetitions) and ``bench_distributed.py`` (20 races, 10 kills).

Each scenario runs the command line as a user would, on a one-layer model, then
inspects the database: records, duplicates, the integrity check, every job's budget
against what it committed, and whether records seen earlier are still there.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import sqlalchemy as sa

__all__ = ["TINY_CONFIG", "Inspection", "Run", "inspect", "kill_loop", "race", "start_tune",
           "tune_argv", "write_config"]

TINY_CONFIG = {"model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
               "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 2,
               "vocab_size": 256, "max_position_embeddings": 256, "torch_dtype": "float16"}


def write_config(folder: Path) -> Path:
    path = folder / "tiny.json"
    path.write_text(json.dumps(TINY_CONFIG))
    return path


def tune_argv(config: Path, db: str, *, trials: int, report: Path | None = None,
              workers: int = 1, runner: str | None = None, seed: int = 0) -> list[str]:
    argv = [sys.executable, "-m", "autosched", "tune", "--model", str(config), "--db", db,
            "--context", "16", "--trials", str(trials), "--cost-model", "none", "--quiet",
            "--seed", str(seed)]
    argv += ["--runner", runner] if runner else ["--workers", str(workers)]
    return argv + (["--report", str(report)] if report else [])


@dataclass
class Run:
    """One ``autosched tune`` process: exit status, stderr, and its report if written."""

    argv: list[str]
    proc: subprocess.Popen
    log: Path
    report: Path | None

    def wait(self, timeout: float = 600) -> Run:
        self.proc.wait(timeout)
        return self

    def kill(self) -> None:
        """kill -9 of the process and everything it started (its pool workers)."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(60)

    @property
    def code(self) -> int | None:
        return self.proc.returncode

    @property
    def stderr(self) -> str:
        return self.log.read_text() if self.log.exists() else ""

    @property
    def measured(self) -> int | None:
        """New measurements its report claims (None without a report)."""
        if self.report is None or not self.report.exists():
            return None
        return int(json.loads(self.report.read_text())["measurements"])


def start_tune(argv: list[str], log: Path, report: Path | None = None,
               fsize_limit: int | None = None) -> Run:
    """Start ``argv`` in its own process group; ``fsize_limit`` caps the bytes any file
    it writes may reach (a quota: writes beyond it fail as on a full disk)."""
    def limit() -> None:
        if fsize_limit is not None:
            import resource

            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize_limit, fsize_limit))
    out = open(log, "w")  # noqa: SIM115 (the child keeps it)
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=out, start_new_session=True,
                            preexec_fn=limit if fsize_limit is not None else None)
    out.close()
    return Run(argv, proc, log, report)


@dataclass
class Inspection:
    """What a database holds after a scenario."""

    keys: set[tuple[str, str, str]]
    duplicates: int
    problems: list[str]
    jobs: list[tuple[int, int, bool]]  # (budget, committed, done) per job

    @property
    def records(self) -> int:
        return len(self.keys)


def inspect(url: str) -> Inspection:
    """Records, duplicates, integrity problems and jobs of the database at ``url``."""
    from autosched.database import SqlDatabase
    from autosched.database.check import check_database
    from autosched.database.schema import jobs, measurements

    db = SqlDatabase(url)
    try:
        recs = db.records()
        keys = {(m.workload.key, m.hw_fingerprint, m.schedule.key) for m in recs}
        m = measurements.c
        committed = (sa.select(m.job, sa.func.count().label("n")).group_by(m.job).subquery())
        rows = db.execute(lambda c: c.execute(
            sa.select(jobs.c.budget, committed.c.n, jobs.c.done)
            .select_from(jobs.outerjoin(committed, committed.c.job == jobs.c.id))
            .order_by(jobs.c.id)).all())
        return Inspection(keys, len(recs) - len(keys), check_database(db),
                          [(int(b), int(n or 0), bool(d)) for b, n, d in rows])
    finally:
        db.close()


@dataclass
class RaceResult:
    runs: list[Run]
    after: Inspection
    errors: list[str] = field(default_factory=list)

    @property
    def lost(self) -> int:
        """Measurements the reports claim that the database does not hold."""
        return sum(r.measured or 0 for r in self.runs) - self.after.records


def race(url: str, n: int, config: Path, folder: Path, *, trials: int) -> RaceResult:
    """``n`` tune processes started at once on a new database at ``url``."""
    runs = [start_tune(tune_argv(config, url, trials=trials, report=folder / f"r{i}.json",
                                 seed=i), folder / f"e{i}.log", folder / f"r{i}.json")
            for i in range(n)]
    for r in runs:
        r.wait()
    errors = [f"exit {r.code}: {r.stderr.strip()[-300:]}" for r in runs if r.code != 0]
    return RaceResult(runs, inspect(url), errors)


@dataclass
class KillResult:
    kills: int  # processes killed before they finished
    lost: int  # records seen before a kill and missing at the end
    before_final: int  # records when the final run started
    final: Run
    after: Inspection


def kill_loop(url: str, config: Path, folder: Path, *, kills: int, trials: int,
              seed: int = 0, window: tuple[float, float] = (1.0, 12.0)) -> KillResult:
    """Start, kill -9 at a random time in ``window`` seconds, ``kills`` times; then run to
    completion. Every record seen before a kill must be there at the end."""
    rng = random.Random(seed)
    seen: set = set()
    killed = 0
    for i in range(kills):
        run = start_tune(tune_argv(config, url, trials=trials, workers=2),
                         folder / f"k{i}.log")
        time.sleep(rng.uniform(*window))
        if run.proc.poll() is None:
            killed += 1
        run.kill()
        seen |= inspect(url).keys
    final = start_tune(tune_argv(config, url, trials=trials, workers=2,
                                 report=folder / "final.json"), folder / "final.log",
                       folder / "final.json").wait()
    after = inspect(url)
    return KillResult(killed, len(seen - after.keys), len(seen), final, after)
