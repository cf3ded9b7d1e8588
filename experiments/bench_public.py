"""The public checkpoint configs of ``experiments/configs/``, unchanged, tuned on every preset.

Per config and preset, one ``autosched tune`` (the Python API, a fresh SQLite database per
preset shared by the configs): the decode step's latency with the default schedules, with
the tuned ones, the analytical bound, tuned/bound, and the wall time of the whole tune
(capture, search, three whole-step simulations). A model the device cannot hold is
reported with autosched's one-line refusal.

    python -m experiments.bench_public [--context 1024] [--trials 32] [--workers 1] [--json]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from autosched.tune import tune
from sim.errors import AutoschedError
from sim.hwio import list_device_presets

CONFIGS = Path(__file__).parent / "configs"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--context", type=int, default=1024)
    ap.add_argument("--trials", type=int, default=32)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--configs", default=None, help="comma-separated file stems (default: all)")
    ap.add_argument("--presets", default=",".join(list_device_presets()))
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    files = sorted(CONFIGS.glob("*.json"))
    if args.configs:
        files = [CONFIGS / f"{s}.json" for s in args.configs.split(",")]
    rows = []
    if not args.json:
        print(f"{'config':<16} {'hw':<10} {'ctx':>5} {'tasks':>5} {'default us':>11} "
              f"{'tuned us':>9} {'bound us':>9} {'tuned/bound':>11} {'wall s':>7}")
    with tempfile.TemporaryDirectory() as tmp:
        for hw in args.presets.split(","):
            db = Path(tmp) / f"{hw}.db"
            for f in files:
                try:
                    rep = tune(f, hw=hw, context=args.context, trials=args.trials,
                               workers=args.workers, db=db, seed=0)
                except AutoschedError as e:  # e.g. weights larger than the device
                    rows.append({"config": f.stem, "hw": hw, "refused": str(e)})
                    if not args.json:
                        print(f"{f.stem:<16} {hw:<10} refused: {e}", flush=True)
                    continue
                e = rep.end_to_end
                rows.append({"config": f.stem, "hw": hw, "context": rep.context,
                             "tasks": len(rep.tasks), "measurements": rep.measurements,
                             "default_ns": e.default_ns, "tuned_ns": e.tuned_ns,
                             "bound_ns": e.bound_ns, "tuned_over_bound": e.tuned_ns / e.bound_ns,
                             "wall_s": rep.wall_s})
                if not args.json:
                    r = rows[-1]
                    print(f"{r['config']:<16} {hw:<10} {r['context']:>5} {r['tasks']:>5} "
                          f"{r['default_ns'] / 1e3:>11.1f} {r['tuned_ns'] / 1e3:>9.1f} "
                          f"{r['bound_ns'] / 1e3:>9.1f} {r['tuned_over_bound']:>11.2f} "
                          f"{r['wall_s']:>7.1f}", flush=True)
    if args.json:
        print(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
