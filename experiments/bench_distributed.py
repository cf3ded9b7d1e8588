"""Tuning beyond one process: measurement throughput, concurrent tunes, killed tunes.

Three tables, each from real processes on this machine::

    python -m experiments.bench_distributed [--only runners,tunes,races,kills]
                                            [--races 20] [--kills 10] [--repeat 3]

* runners and tunes: measurements per second of one batch of real candidates (a llama2-7b FFN
  GEMV and attention on hbm-pim, lowered in the workers) on the local pool with 1 and 2
  workers and on a Dask cluster with 1 and 2 workers (best of ``--repeat``), the Dask
  overhead per measurement (one Dask worker against the in-process runner), and
  ``autosched tune`` on llama-tiny with 96 measurements: one process with 2 workers, and
  two processes with 1 worker each sharing one PostgreSQL database (new measurements per
  second of wall time, startup and the end-to-end figures included);
* races: ``--races`` times, two ``autosched tune`` processes started at once on a new
  SQLite file and on a new PostgreSQL database: errors, duplicates, lost records, and
  whether the job's budget was spent exactly once;
* kills: one tune killed with kill -9 at random points ``--kills`` times in a row, then
  run to completion: lost records, duplicates, budget, the report, ``run --check``.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from autosched.families.registry import family_of
from autosched.measure import DaskRunner, LocalRunner, MeasureInput, Runner
from experiments.scenarios import inspect, kill_loop, race, write_config
from experiments.services import start_dask, start_postgres
from search_spaces import Schedule, Workload
from sim.hwio import load_hardware

WORKLOADS = (Workload.make("gemv", m=1, n=4096, k=11008),
             Workload.make("attention", b=1, q=1, h=32, kvh=32, d=128, l=1024))


def candidates(per: int = 24) -> list[MeasureInput]:
    """``per`` valid points of each workload, spread over the space (no program: the
    runner's workers lower them)."""
    hw, out = load_hardware("hbm-pim"), []
    for w in WORKLOADS:
        space = family_of(w).space(w, hw)
        points = list(space.enumerate())
        out += [MeasureInput(w, Schedule.of(space, p), hw)
                for p in points[:: max(1, len(points) // per)][:per]]
    return out


def rate(runner: Runner, inputs: list[MeasureInput], repeat: int) -> float:
    """Seconds per measurement of one batch (best of ``repeat``, after a warm-up batch)."""
    runner.run(inputs[:4])
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        ms = runner.run(inputs)
        best = min(best, time.perf_counter() - t0)
        assert len(ms) == len(inputs) and all(m.ok for m in ms)
    return best / len(inputs)


def tune_rate(folder: Path, url: str, processes: int, workers: int) -> tuple[float, int]:
    """(new measurements per second, measurements) of ``processes`` tunes on one job."""
    argv = [sys.executable, "-m", "autosched", "tune", "--model", "llama-tiny", "--db", url,
            "--trials", "96", "--workers", str(workers), "--quiet"]
    t0 = time.perf_counter()
    procs = [subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              text=True) for _ in range(processes)]
    for p in procs:
        _, err = p.communicate(timeout=1800)
        assert p.returncode == 0, err
    wall = time.perf_counter() - t0
    n = inspect(url).records
    return n / wall, n


def runners(repeat: int) -> None:
    inputs = candidates()
    rows = []
    for n in (1, 2):
        with LocalRunner(n) as r:
            rows.append((f"local pool, {n} worker(s)", rate(r, inputs, repeat)))
    for n in (1, 2):
        cluster = start_dask(n)
        try:
            with DaskRunner(cluster.address) as r:
                rows.append((f"Dask, {n} worker(s)", rate(r, inputs, repeat)))
        finally:
            cluster.stop()
    print(f"\n{len(inputs)} candidates (llama2-7b FFN GEMV and attention, hbm-pim)\n")
    print("| runner | measurements/s | ms per measurement | vs 1 worker |")
    print("|---|---|---|---|")
    for i, (name, s) in enumerate(rows):
        print(f"| {name} | {1 / s:.1f} | {1e3 * s:.1f} | {rows[i - i % 2][1] / s:.2f}x |")
    print(f"\nDask overhead per measurement (1 Dask worker vs in-process): "
          f"{1e3 * (rows[2][1] - rows[0][1]):.1f} ms (goal < 10 ms)")


def tunes() -> None:
    pg = start_postgres()
    try:
        with tempfile.TemporaryDirectory() as d:
            rows = [("tune llama-tiny, 1 process x 2 workers, PostgreSQL",
                     *tune_rate(Path(d), pg.new_database(), 1, 2)),
                    ("tune llama-tiny, 2 processes x 1 worker, one PostgreSQL job",
                     *tune_rate(Path(d), pg.new_database(), 2, 1))]
    finally:
        pg.stop()
    print("\n| tune | new measurements/s (wall) | measurements |")
    print("|---|---|---|")
    for name, r, n in rows:
        print(f"| {name} | {r:.2f} | {n} |")


def races(n: int) -> None:
    pg = start_postgres()
    rows = []
    try:
        for kind in ("sqlite", "postgresql"):
            tally = {"errors": 0, "duplicates": 0, "lost": 0, "budget": 0, "wall": 0.0}
            for _ in range(n):
                with tempfile.TemporaryDirectory() as d:
                    folder = Path(d)
                    url = f"sqlite:///{folder / 'new.db'}" if kind == "sqlite" \
                        else pg.new_database()
                    t0 = time.perf_counter()
                    res = race(url, 2, write_config(folder), folder, trials=24)
                    tally["wall"] += time.perf_counter() - t0
                    tally["errors"] += len(res.errors)
                    tally["duplicates"] += res.after.duplicates + len(res.after.problems)
                    tally["lost"] += max(res.lost, 0) + (24 - res.after.records)
                    tally["budget"] += res.after.jobs == [(24, 24, True)]
            rows.append((kind, tally))
    finally:
        pg.stop()
    print("\n| race: 2 tunes at once on a new database | repetitions | errors | "
          "duplicates or integrity problems | lost records | budget spent exactly once | "
          "s per race |")
    print("|---|---|---|---|---|---|---|")
    for kind, t in rows:
        print(f"| {kind} | {n} | {t['errors']} | {t['duplicates']} | {t['lost']} | "
              f"{t['budget']}/{n} | {t['wall'] / n:.1f} |")


def kills(n: int) -> None:
    with tempfile.TemporaryDirectory() as d:
        folder = Path(d)
        config = write_config(folder)
        url = f"sqlite:///{folder / 'k.db'}"
        res = kill_loop(url, config, folder, kills=n, trials=40, seed=0, window=(2.0, 9.0))
        check = subprocess.run([sys.executable, "-m", "autosched", "run", "--model",
                                str(config), "--db", url, "--check", "--steps", "2"],
                               capture_output=True, text=True, timeout=600)
        report_ok = res.final.code == 0 and res.final.measured is not None
    a = res.after
    spent = all(c == b for b, c, done in a.jobs if done) and a.jobs[-1][2]
    print("\n| kill -9 loop | kills landed | lost | duplicates | integrity | whole budget "
          "spent | final report | run --check |")
    print("|---|---|---|---|---|---|---|---|")
    print(f"| {n} starts, then a full run | {res.kills} | {res.lost} | {a.duplicates} | "
          f"{'ok' if not a.problems else a.problems[0]} | "
          f"{'yes' if spent else 'no'} ({sum(c for _, c, _ in a.jobs)} records, jobs "
          f"{a.jobs}) | {'valid' if report_ok else 'missing'} | "
          f"{'PASS' if check.returncode == 0 else 'FAIL'} |")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", default="runners,tunes,races,kills")
    ap.add_argument("--races", type=int, default=20)
    ap.add_argument("--kills", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    parts = set(args.only.split(","))
    if "runners" in parts:
        runners(args.repeat)
    if "tunes" in parts:
        tunes()
    if "races" in parts:
        races(args.races)
    if "kills" in parts:
        kills(args.kills)


if __name__ == "__main__":
    main()
