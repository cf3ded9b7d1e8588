"""A serving profile tuned in one run against each of its buckets tuned on its own.

For one model and hardware, the buckets of a serving profile (decode at every batch and
context given) are tuned twice from empty databases with the same total budget of new
measurements: once as a profile (:func:`autosched.tune_profile.tune_profile`: one run,
one database, workloads shared between buckets measured once), and once as one separate
``tune`` per bucket, each with an equal share of the budget and its own database. Prints,
bucket by bucket, both tuned steps and their ratio (profile / separate: above 1 the
profile's step is slower), and the wall time of the profile run against the sum of the
separate runs' (the model is captured once before either, so that neither pays the
process's one-time start-up).

    python -m experiments.bench_profile [--model llama2-7b] [--hw hbm-pim]
        [--batches 1,8,32] [--contexts 1024,4096] [--trials 96] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from autosched.defaults import DEFAULT_TRIALS
from autosched.pipeline import model_graph
from autosched.tune import tune
from autosched.tune_profile import Bucket, buckets_of, tune_profile


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


def profile_run(model: str, hw: str, buckets: list[Bucket], trials: int,
                seed: int) -> tuple[dict[Bucket, float], float, int]:
    """(tuned ns per bucket, wall s, measurements) of one profile run on a new database."""
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        rep = tune_profile(model, buckets, trials=trials, db=Path(tmp) / "profile.db",
                           hw=hw, seed=seed)
        wall = time.perf_counter() - t0
    tuned = {b: r.end_to_end.tuned_ns for b, r in zip(buckets, rep.reports, strict=True)}
    return tuned, wall, rep.measurements


def separate_runs(model: str, hw: str, buckets: list[Bucket], trials: int,
                  seed: int) -> tuple[dict[Bucket, float], dict[Bucket, float],
                                      dict[Bucket, float], int]:
    """(tuned ns, default ns, wall s) per bucket and the measurements of one ``tune`` per
    bucket, each on its own new database with ``trials`` split evenly (the first buckets
    take the remainder)."""
    tuned, default, wall, spent = {}, {}, {}, 0
    for i, b in enumerate(buckets):
        share = trials // len(buckets) + (1 if i < trials % len(buckets) else 0)
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            rep = tune(model, phase=b.phase, batch=b.batch, context=b.context,
                       trials=share, db=Path(tmp) / "one.db", hw=hw, seed=seed)
            wall[b] = time.perf_counter() - t0
        tuned[b], default[b] = rep.end_to_end.tuned_ns, rep.end_to_end.default_ns
        spent += rep.measurements
    return tuned, default, wall, spent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="llama2-7b")
    ap.add_argument("--hw", default="hbm-pim")
    ap.add_argument("--batches", default="1,8,32")
    ap.add_argument("--contexts", default="1024,4096")
    ap.add_argument("--trials", type=int, default=DEFAULT_TRIALS)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    buckets = buckets_of(["decode"], _ints(a.batches), _ints(a.contexts))
    model_graph(a.model, phase="decode", context=buckets[0].context)  # one-time start-up
    prof, prof_wall, prof_n = profile_run(a.model, a.hw, buckets, a.trials, a.seed)
    sep, default, sep_wall, sep_n = separate_runs(a.model, a.hw, buckets, a.trials, a.seed)
    print(f"{a.model} on {a.hw}, {a.trials} measurements in all "
          f"(profile spent {prof_n}, separate runs {sep_n})")
    print(f"{'bucket':<18} {'default us':>10} {'profile us':>10} {'separate us':>11} "
          f"{'profile/separate':>16} {'separate wall s':>15}")
    rows = []
    for b in buckets:
        ratio = prof[b] / sep[b]
        rows.append({"bucket": b.describe(), "default_ns": default[b], "profile_ns": prof[b],
                     "separate_ns": sep[b], "ratio": ratio, "separate_wall_s": sep_wall[b]})
        print(f"{b.describe():<18} {default[b] / 1e3:>10.1f} {prof[b] / 1e3:>10.1f} "
              f"{sep[b] / 1e3:>11.1f} {ratio:>16.3f} {sep_wall[b]:>15.1f}")
    total = sum(sep_wall.values())
    print(f"wall: profile {prof_wall:.1f} s, separate runs {total:.1f} s in all "
          f"({prof_wall / total:.2f}x); worst bucket ratio {max(r['ratio'] for r in rows):.3f}")
    if a.json:
        Path(a.json).write_text(json.dumps({"model": a.model, "hw": a.hw, "trials": a.trials,
                                            "profile_wall_s": prof_wall,
                                            "separate_wall_s": total, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
