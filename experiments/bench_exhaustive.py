"""Search efficiency against the exhaustive optimum, on every small decode space.

For each llama-tiny and llama2-7b decode workload whose schedule space has at most
``--limit`` valid points (constraints applied while enumerating), measure every point
(the exhaustive optimum, parallel runner) and the best a fresh TPE search finds with
``--budget`` measurements (no cost model, seed 0), then print workload, space size,
optimum, best@budget and their ratio (goal: <= 1.02).

    python experiments/bench_exhaustive.py [--quick] [--hw hbm-pim] [--workers N]
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
from pathlib import Path

from autosched.codegen.lowering import lowering_for
from autosched.database import open_database
from autosched.frontend import capture, tasks
from autosched.measure import LocalRunner, MeasureInput, Runner
from autosched.search import TaskTuner
from search_spaces import Schedule, Workload
from sim.errors import AutoschedError
from sim.hardware import Hardware
from sim.hwio import load_hardware


def valid_points(w: Workload, hw: Hardware, limit: int) -> list[dict] | None:
    """Every valid point of ``w``'s space, or None when there are more than ``limit``."""
    out = []
    for p in lowering_for(w).space(w, hw).enumerate():
        out.append(p)
        if len(out) > limit:
            return None
    return out


def optimum(w: Workload, hw: Hardware, runner: Runner, points: list[dict]) -> float:
    """Best latency over ``points`` (the whole valid space), measured in parallel."""
    space = lowering_for(w).space(w, hw)
    ms = runner.run([MeasureInput(w, Schedule.of(space, p), hw) for p in points])
    return min((m.latency_ns for m in ms if m.ok), default=math.inf)


def searched(w: Workload, hw: Hardware, runner: Runner, budget: int, db_dir: Path) -> float:
    """Best latency a fresh TPE search finds within ``budget`` measurements."""
    db = open_database(db_dir / f"{w.digest}.db")
    tuner = TaskTuner(w, 1, hw, db=db, runner=runner, sampler="tpe", seed=0)
    while tuner.measured < budget and tuner.step(min(8, budget - tuner.measured)):
        pass
    return tuner.best.latency_ns if tuner.best else math.inf


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="llama-tiny only, small spaces")
    ap.add_argument("--hw", default="hbm-pim")
    ap.add_argument("--limit", type=int, default=5000, help="most valid points enumerated")
    ap.add_argument("--budget", type=int, default=64)
    ap.add_argument("--workers", type=int, default=None)
    args = ap.parse_args()
    hw = load_hardware(args.hw)
    models = ["llama-tiny"] if args.quick else ["llama-tiny", "llama2-7b"]
    limit = min(args.limit, 1000) if args.quick else args.limit
    print(f"hardware {hw.name}; spaces <= {limit} valid points; search budget {args.budget}")
    print(f"{'model':<11} {'workload':<58} {'size':>6} {'valid':>5} {'optimum ns':>12} "
          f"{'best@' + str(args.budget):>12} {'ratio':>6}")
    ratios = []
    start = time.perf_counter()
    with LocalRunner(args.workers) as runner, tempfile.TemporaryDirectory() as tmp:
        for model in models:
            for task in tasks(capture(model, phase="decode")):
                w = task.workload
                try:
                    size = lowering_for(w).space(w, hw).size()
                except AutoschedError as e:
                    print(f"{model:<11} {w.key:<58} skipped: {e}")
                    continue
                points = valid_points(w, hw, limit)
                if points is None:
                    print(f"{model:<11} {w.key:<58} {size:>6} more than {limit} valid points")
                    continue
                valid, best = len(points), optimum(w, hw, runner, points)
                found = searched(w, hw, runner, args.budget, Path(tmp))
                ratio = found / best
                ratios.append(ratio)
                print(f"{model:<11} {w.key:<58} {size:>6} {valid:>5} {best:>12.1f} "
                      f"{found:>12.1f} {ratio:>6.3f}")
    if ratios:
        within = sum(r <= 1.02 for r in ratios)
        print(f"{within}/{len(ratios)} within 2 % of the optimum; worst ratio {max(ratios):.3f}; "
              f"{time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
