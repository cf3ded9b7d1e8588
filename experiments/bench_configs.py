"""Sweep random configs of every supported architecture on every preset: pass / refused
/ failed counts, overall and per architecture.

Each config (``experiments.arch_samplers.sample_any``, seeded: an architecture, then its
own fields and ranges) is compiled, simulated against its bound and run with
``run --check`` against ``transformers`` on each preset. Goal: 0 failed; a refusal only
where ``transformers`` cannot run the config either.

    python -m experiments.bench_configs [--configs 300] [--seed 0] [--steps 8] [--json]
        [--rows FILE] [--jobs N] [--fusion none|full]

``--fusion full`` compiles, simulates and checks every config under the full fusion plan.

``--rows FILE`` appends each outcome to a JSON-lines file as it is known and skips the
(config, preset) pairs already there, so a stopped sweep resumes where it stopped.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import time
from collections import Counter
from pathlib import Path

from experiments.arch_samplers import sample_any
from experiments.llama_configs import RngPicker, check
from search_spaces.fusion import FULL_FUSION
from sim.hwio import list_device_presets


def _done(rows_file: Path | None, seed: int, steps: int,
          fusion: str) -> dict[tuple[int, str], dict]:
    """Rows of an earlier run of the same sweep (seed, steps, fusion) kept in
    ``rows_file``."""
    if rows_file is None or not rows_file.exists():
        return {}
    done = {}
    for line in rows_file.read_text().splitlines():
        row = json.loads(line)
        if (row.get("seed"), row.get("steps"), row.get("fusion", "none")) == (seed, steps,
                                                                               fusion):
            done[row["config"], row["hw"]] = row
    return done


def _one(task: tuple[int, int, int, str, bool]) -> dict:
    """Check config ``i`` of the sweep ``seed`` on ``hw`` (a row of :func:`sweep`)."""
    seed, steps, i, hw, fused = task
    hf = sample_any(RngPicker(seed * 100_003 + i))
    t0 = time.perf_counter()
    out = check(hf, hw, steps=steps, seed=i, fusion=dict(FULL_FUSION) if fused else None)
    return {"config": i, "hw": hw, "status": out.status, "message": out.message,
            "latency_over_bound": out.latency_over_bound, "max_rel_err": out.max_rel_err,
            "wall_s": time.perf_counter() - t0, "hf": hf, "seed": seed, "steps": steps,
            "fusion": "full" if fused else "none"}


def sweep(n: int, seed: int, steps: int, presets: list[str], verbose: bool = False,
          rows_file: Path | None = None, jobs: int = 1, fused: bool = False) -> list:
    """One row per (config, preset): the config, the preset and its outcome; ``jobs``
    processes check configs side by side (rows come back in sweep order); ``fused``: under
    the full fusion plan."""
    done = _done(rows_file, seed, steps, "full" if fused else "none")
    todo = [(seed, steps, i, hw, fused) for i in range(n) for hw in presets
            if (i, hw) not in done]
    if jobs > 1:
        pool = multiprocessing.get_context("spawn").Pool(jobs)
        results = pool.imap(_one, todo)
    else:
        pool, results = None, map(_one, todo)
    try:
        for row in results:
            done[row["config"], row["hw"]] = row
            if rows_file is not None:
                with open(rows_file, "a") as f:
                    f.write(json.dumps(row, default=str) + "\n")
            if verbose or row["status"] == "failed":
                print(f"config {row['config']} {row['hw']}: {row['status']} "
                      f"{row['message'][:300]}", flush=True)
    finally:
        if pool is not None:
            pool.terminate()
    return [done[i, hw] for i in range(n) for hw in presets]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--configs", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--presets", default=",".join(list_device_presets()))
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--jobs", type=int, default=1, help="processes checking side by side")
    ap.add_argument("--rows", type=Path, default=None,
                    help="JSON-lines file of outcomes: appended to, and resumed from")
    ap.add_argument("--fusion", choices=("none", "full"), default="none")
    args = ap.parse_args()
    t0 = time.perf_counter()
    rows = sweep(args.configs, args.seed, args.steps, args.presets.split(","), args.verbose,
                 args.rows, args.jobs, args.fusion == "full")
    if args.json:
        print(json.dumps(rows, indent=2, default=str))
        return
    counts = Counter((r["hw"], r["status"]) for r in rows)
    print(f"\n{args.configs} configs, seed {args.seed}, {args.steps} steps, fusion "
          f"{args.fusion}, "
          f"{time.perf_counter() - t0:.0f} s")
    print(f"{'hw':<10} {'pass':>6} {'refused':>8} {'failed':>7} {'worst lat/bound':>16} "
          f"{'worst rel err':>14}")
    for hw in args.presets.split(","):
        ok = [r for r in rows if r["hw"] == hw and r["status"] == "pass"]
        worst = max((r["latency_over_bound"] for r in ok), default=float("nan"))
        err = max((r["max_rel_err"] for r in ok), default=float("nan"))
        print(f"{hw:<10} {counts[hw, 'pass']:>6} {counts[hw, 'refused']:>8} "
              f"{counts[hw, 'failed']:>7} {worst:>16.2f} {err:>14.4f}")
    archs = sorted({r["hf"]["model_type"] for r in rows})
    for arch in archs:
        mine = Counter(r["status"] for r in rows if r["hf"]["model_type"] == arch)
        print(f"  {arch:<12} pass {mine['pass']:>4}  refused {mine['refused']:>3}  "
              f"failed {mine['failed']:>3}")
    refusals = Counter(r["message"].split(":")[-1].strip()[:80] for r in rows
                       if r["status"] == "refused")
    for why, n in refusals.most_common():
        print(f"refused x{n}: {why}")


if __name__ == "__main__":
    main()
