"""``autosched tune`` against the default step, every batch and phase a server runs.

For each (hardware, step) ``autosched tune`` runs with its defaults (the default budget,
fusion searched, an empty database each) and the table shows the default step, the
tuned step, tuned / default (never above 1: the default step is one of the candidates
the tuned one is compared with before anything is stored), tuned / bound, the winning
placement and where its schedules come from.

    python -m experiments.bench_never_slower [--model llama-tiny] [--hw hbm-pim aim-gddr6]
        [--steps decode:1:128 decode:8:128 decode:32:128 prefill:1:128 prefill:1:512]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from autosched.defaults import DEFAULT_TRIALS
from autosched.tune import tune

STEPS = ("decode:1:128", "decode:8:128", "decode:32:128", "prefill:1:128", "prefill:1:512")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="llama-tiny")
    ap.add_argument("--hw", nargs="+", default=["hbm-pim", "aim-gddr6"])
    ap.add_argument("--steps", nargs="+", default=list(STEPS), metavar="PHASE:BATCH:CONTEXT")
    ap.add_argument("--trials", type=int, default=DEFAULT_TRIALS)
    ap.add_argument("--workers", type=int, default=1)
    a = ap.parse_args()
    print(f"{'hw':<10} {'step':<16} {'default us':>10} {'tuned us':>9} {'tuned/default':>13} "
          f"{'tuned/bound':>11} {'placement':>9} {'schedules':>9} {'wall s':>7}")
    worst = 0.0
    for hw in a.hw:
        for s in a.steps:
            phase, batch, context = s.split(":")
            t0 = time.perf_counter()
            with tempfile.TemporaryDirectory() as tmp:
                rep = tune(a.model, hw=hw, phase=phase, batch=int(batch), context=int(context),
                           trials=a.trials, db=Path(tmp) / "t.db", workers=a.workers)
            e = rep.end_to_end
            worst = max(worst, e.tuned_ns / e.default_ns)
            print(f"{rep.hardware:<10} {s:<16} {e.default_ns / 1e3:>10.2f} "
                  f"{e.tuned_ns / 1e3:>9.2f} {e.tuned_ns / e.default_ns:>13.3f} "
                  f"{e.tuned_ns / e.bound_ns:>11.3f} "
                  f"{e.placement:>9} {e.schedules:>9} {time.perf_counter() - t0:>7.1f}",
                  flush=True)
    print(f"worst tuned / default: {worst:.3f}")


if __name__ == "__main__":
    main()
