"""Search efficiency against the exhaustive optimum, on every enumerable decode space.

For each llama-tiny and llama2-7b decode workload (deduplicated) whose schedule space has
at most ``--limit`` valid points (constraints applied while enumerating) and more than
one, every point is measured once (the exhaustive optimum; parallel runner). Then each
strategy searches from an empty database with ``--budget`` measurements, in rounds of
8, drawing its measurements from that table (a lookup, so a strategy costs only its own
proposing and ranking): ``model`` is TPE with the pretrained cost model ranking the
proposals (the default search), ``tpe`` is TPE alone. The table prints workload, valid
points, optimum, best@budget of each strategy (worst over ``--seeds``) and their ratios
to the optimum (goal: <= 1.02).

The optimum is also set against its family's bound (goal: within 1.1x; the bound never
above it). ``--bound-only`` prints that alone.

    python -m experiments.bench_exhaustive [--quick] [--hw hbm-pim aim-gddr6] [--workers 2]
        [--bound-only]
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
from pathlib import Path

from autosched import families  # noqa: F401  (register the built-in families)
from autosched.database import open_database
from autosched.families.registry import family_of
from autosched.frontend import capture
from autosched.ir import tasks
from autosched.measure import LocalRunner, MeasureInput, Runner
from autosched.measure.record import Measurement
from autosched.pipeline import model_graph
from autosched.search import SearchContext, TaskTuner
from cost_models import make_cost_model
from experiments.bench_search_data import CACHE
from experiments.bench_search_runs import ReplayRunner
from search_spaces import Schedule, Workload
from search_spaces.fusion import FULL_FUSION
from sim import SIM_VERSION
from sim.errors import AutoschedError
from sim.hardware import Hardware
from sim.hwio import load_hardware

STRATEGIES = ("model", "tpe")
QUICK = {"gemv:m=1,n=256,k=256:fp16", "gemv:m=1,n=4096,k=256:fp16",
         "attention:b=1,q=1,h=8,kvh=4,d=32,l=512:fp16"}


def valid_points(w: Workload, hw: Hardware, limit: int) -> list[dict] | None:
    """Every valid point of ``w``'s space, or None when there are more than ``limit``."""
    out = []
    for p in family_of(w).space(w, hw).enumerate():
        out.append(p)
        if len(out) > limit:
            return None
    return out


def exhaustive(w: Workload, hw: Hardware, runner: Runner, points: list[dict],
               cache: Path = CACHE) -> dict[str, Measurement]:
    """Every point of ``points`` measured (in parallel), by schedule key. Measurements are
    kept in ``cache/exhaustive.db`` (shared with the search benchmark), so only points it
    lacks for this simulator version are simulated."""
    space = family_of(w).space(w, hw)
    cache.mkdir(parents=True, exist_ok=True)
    (cache / ".gitignore").write_text("*\n")
    db = open_database(cache / "exhaustive.db")
    try:
        have = {m.schedule.key: m for m in db.records(
            workload=w, hw_fingerprint=hw.fingerprint, space=space.name,
            space_version=space.version) if m.sim_version == SIM_VERSION}
        todo = [s for s in (Schedule.of(space, p) for p in points) if s.key not in have]
        new = runner.run([MeasureInput(w, s, hw) for s in todo])
        db.commit_many(new)
    finally:
        db.close()
    have.update((m.schedule.key, m) for m in new)
    return {k: have[k] for k in (Schedule.of(space, p).key for p in points)}


def searched(w: Workload, hw: Hardware, table: dict[str, Measurement], strategy: str,
             budget: int, seed: int, db_dir: Path) -> tuple[float, float]:
    """(best latency found within ``budget`` measurements, CPU seconds the search itself
    spent: replayed measurements cost nothing)."""
    db = open_database(db_dir / f"{w.digest}-{hw.name}-{strategy}-{seed}.db")
    model = make_cost_model("pretrained") if strategy == "model" else None
    start = time.process_time()
    tuner = TaskTuner(w, 1, SearchContext.of(hardware=hw, database=db,
                                             runner=ReplayRunner(table), trials=budget,
                                             strategy="tpe", seed=seed, cost_model=model))
    while tuner.measured < budget and tuner.step(min(8, budget - tuner.measured)):
        pass
    best = tuner.best.latency_ns if tuner.best else math.inf
    return best, time.process_time() - start


def workloads(quick: bool) -> list[tuple[str, Workload]]:
    """(model, workload) of every decode task, each workload once: llama-tiny and llama2-7b
    unfused at their longest context, and llama-tiny under the full fusion plan (the plan
    ``tune`` picks for it by default; its fused GEMVs are spaces of their own)."""
    graphs = [("llama-tiny", capture("llama-tiny", phase="decode"))]
    if not quick:
        graphs += [("llama2-7b", capture("llama2-7b", phase="decode")),
                   ("llama-tiny", model_graph("llama-tiny", context=512,
                                              fusion=FULL_FUSION)[1])]
    seen: dict[str, tuple[str, Workload]] = {}
    for model, graph in graphs:
        for task in tasks(graph):
            if task.workload.key not in seen and (not quick or task.workload.key in QUICK):
                seen[task.workload.key] = (model, task.workload)
    return list(seen.values())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="three llama-tiny workloads")
    ap.add_argument("--hw", nargs="+", default=["hbm-pim", "aim-gddr6"])
    ap.add_argument("--limit", type=int, default=5000, help="most valid points enumerated")
    ap.add_argument("--budget", type=int, default=64)
    ap.add_argument("--seeds", type=int, default=1, help="searches per strategy (seeds 0..)")
    ap.add_argument("--strategies", nargs="+", default=list(STRATEGIES), choices=STRATEGIES)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--bound-only", action="store_true",
                    help="the optimum against the family bound alone, no search")
    args = ap.parse_args()
    if args.bound_only:
        args.strategies = []
    ratios: dict[str, list[float]] = {s: [] for s in args.strategies}
    to_bound: list[float] = []
    start = time.perf_counter()
    head = "".join(f" {'best@' + str(args.budget) + ' ' + s:>16} {'ratio':>6}"
                   for s in args.strategies)
    with LocalRunner(args.workers) as runner, tempfile.TemporaryDirectory() as tmp:
        for hw in [load_hardware(h) for h in args.hw]:
            print(f"\nhardware {hw.name}; spaces <= {args.limit} valid points; "
                  f"budget {args.budget}; worst of {args.seeds} seed(s)")
            print(f"{'workload':<46} {'valid':>5} {'optimum ns':>11} {'bound ns':>10} "
                  f"{'opt/bound':>9}{head} {'search s':>8}")
            for _model, w in workloads(args.quick):
                try:
                    points = valid_points(w, hw, args.limit)
                except AutoschedError as e:
                    print(f"{w.key:<46} skipped: {e}")
                    continue
                if points is None or len(points) < 2:
                    what = "too many" if points is None else "one"
                    print(f"{w.key:<46} {what} valid point(s): nothing to search")
                    continue
                table = exhaustive(w, hw, runner, points)
                best = min((m.latency_ns for m in table.values() if m.ok), default=math.inf)
                bnd = family_of(w).bound(w, hw)
                to_bound.append(best / bnd)
                row, secs = (f"{w.key:<46} {len(points):>5} {best:>11.1f} {bnd:>10.1f} "
                             f"{best / bnd:>9.3f}{'  BOUND ABOVE' if bnd > best else ''}"), 0.0
                for s in args.strategies:
                    runs = [searched(w, hw, table, s, args.budget, seed, Path(tmp))
                            for seed in range(args.seeds)]
                    found = max(r[0] for r in runs)
                    secs += sum(r[1] for r in runs)
                    ratios[s].append(found / best)
                    row += f" {found:>16.1f} {found / best:>6.3f}"
                print(row + f" {secs:>8.1f}", flush=True)
    print()
    if to_bound:
        print(f"optimum / family bound: {sum(r <= 1.1 for r in to_bound)}/{len(to_bound)} "
              f"within 1.1x; worst {max(to_bound):.3f}; bound above the optimum "
              f"{sum(r < 1 for r in to_bound)} time(s)")
    for s, rs in ratios.items():
        if rs:
            print(f"{s}: {sum(r <= 1.02 for r in rs)}/{len(rs)} within 2 % of the optimum; "
                  f"worst ratio {max(rs):.3f}; geomean {math.prod(rs) ** (1 / len(rs)):.3f}")
    print(f"{time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
