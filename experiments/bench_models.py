"""End-to-end decode step of the bundled models on every preset, default schedules.

Prints, per model and preset: the simulated decode-step latency of the linked program,
the analytical bound (sum of per-operator bounds), the plain-memory baseline (every
operator on its host path, weights and KV cache streamed over the external bus), their
ratios, tokens/s and the wall time of the whole compile + simulate.

    python experiments/bench_models.py [--context 1024] [--models a,b] [--json] [--db PATH]
"""

from __future__ import annotations

import argparse
import json

from autosched.compiler import simulate_model
from sim.hwio import list_presets

MODELS = ("llama-tiny", "llama2-7b", "llama3-8b")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--context", type=int, default=1024)
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--presets", default=",".join(list_presets()))
    ap.add_argument("--db", default=None, help="use tuned schedules from this database")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rows = []
    for model in args.models.split(","):
        for hw in args.presets.split(","):
            ctx = min(args.context, 512) if model == "llama-tiny" else args.context
            f = simulate_model(model, hw, context=ctx, db=args.db)
            rows.append({"model": model, "hw": hw, "context": ctx, "latency_ns": f.latency_ns,
                         "bound_ns": f.bound_ns, "baseline_ns": f.baseline_ns,
                         "latency_over_bound": f.latency_ns / f.bound_ns,
                         "speedup_vs_baseline": f.baseline_ns / f.latency_ns,
                         "tokens_per_s": f.tokens_per_s, "wall_s": f.sim_wall_s})
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"{'model':<11} {'hw':<10} {'ctx':>5} {'latency us':>11} {'bound us':>9} "
          f"{'lat/bound':>9} {'baseline us':>11} {'speedup':>8} {'tok/s':>8} {'wall s':>7}")
    for r in rows:
        print(f"{r['model']:<11} {r['hw']:<10} {r['context']:>5} {r['latency_ns'] / 1e3:>11.1f} "
              f"{r['bound_ns'] / 1e3:>9.1f} {r['latency_over_bound']:>9.2f} "
              f"{r['baseline_ns'] / 1e3:>11.1f} {r['speedup_vs_baseline']:>8.2f} "
              f"{r['tokens_per_s']:>8.1f} {r['wall_s']:>7.1f}")


if __name__ == "__main__":
    main()
