"""End-to-end decode step of the bundled one-device models on every preset, default schedules.

Prints, per model and preset: the simulated decode-step latency of the linked program,
the analytical bound (sum of per-operator bounds), the plain-memory baseline (every
operator on its host path, weights and KV cache streamed over the external bus), their
ratios, tokens/s and the wall time of compile and simulate. The cases are the regression
suite's (``autosched regress --suite full`` gates the same figures) and run through its
runner; ``--markdown`` prints the README's table.

    python experiments/bench_models.py [--models a,b] [--presets a,b] [--json | --markdown]
"""

from __future__ import annotations

import argparse
import json

from autosched.regress import readme_model_cases, run_case
from autosched.regress.suites import FULL_MODELS
from autosched.regress.tables import model_table
from sim.hwio import list_device_presets


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(FULL_MODELS),
                    help="built-in models one device holds (larger ones: bench_serving.py)")
    ap.add_argument("--presets", default=",".join(list_device_presets()))
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--markdown", action="store_true", help="the README's table")
    args = ap.parse_args()
    cases = readme_model_cases(tuple(args.models.split(",")), tuple(args.presets.split(",")))
    results = [run_case(c) for c in cases]
    failed = [r for r in results if not r.ok]
    if failed:
        raise SystemExit("\n".join(f"{r.case}: {r.error}" for r in failed))
    if args.json:
        print(json.dumps({r.case: r.to_dict() for r in results}, indent=2))
        return
    if args.markdown:
        print(model_table(results))
        return
    print(f"{'case':<42} {'latency us':>11} {'bound us':>9} {'lat/bound':>9} "
          f"{'baseline us':>11} {'speedup':>8} {'tok/s':>9} {'compile s':>9} {'sim s':>6}")
    for r in results:
        f, i, w = r.figures, r.info, r.wall
        print(f"{r.case:<42} {f['latency_ns'] / 1e3:>11.1f} {f['bound_ns'] / 1e3:>9.1f} "
              f"{i['latency_over_bound']:>9.2f} {f['baseline_ns'] / 1e3:>11.1f} "
              f"{i['speedup_vs_baseline']:>8.2f} {i['tokens_per_s']:>9.1f} "
              f"{w['compile_s']:>9.2f} {w['simulate_s']:>6.2f}")


if __name__ == "__main__":
    main()
