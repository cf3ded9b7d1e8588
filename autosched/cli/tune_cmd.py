"""``autosched tune --model NAME|config.json ...``: tune a model, print tables, write a report."""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING

from .output import kv_table, table

if TYPE_CHECKING:
    from ..search import Progress


def register(sub: argparse._SubParsersAction) -> None:
    from ..defaults import DB_DEFAULT, DEFAULT_CONTEXT, DEFAULT_TRIALS, SAMPLERS
    from ..tune import DEFAULT_COST_MODEL, FUSION_MODES

    p = sub.add_parser("tune", help="tune every workload of a model and store the schedules")
    p.add_argument("--model", required=True, metavar="NAME|FILE",
                   help="a built-in model (see `autosched models`) or a config.json")
    p.add_argument("--hw", default="hbm-pim", metavar="NAME|FILE", help="default: hbm-pim")
    p.add_argument("--phase", choices=("decode", "prefill"), default="decode")
    p.add_argument("--batch", type=int, default=1, metavar="B")
    p.add_argument("--context", type=int, default=None, metavar="L",
                   help=f"KV length (decode) or prompt length (prefill); default "
                        f"{DEFAULT_CONTEXT}")
    p.add_argument("--trials", type=int, default=DEFAULT_TRIALS, metavar="N",
                   help=f"new measurements this run may spend (default {DEFAULT_TRIALS})")
    p.add_argument("--workers", type=int, default=None, metavar="N",
                   help=f"simulator processes (default: all {os.cpu_count()} cores)")
    p.add_argument("--db", default=DB_DEFAULT, metavar="PATH|URL")
    p.add_argument("--report", default=None, metavar="FILE", help="write a JSON report")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--sampler", choices=SAMPLERS, default="tpe")
    p.add_argument("--cost-model", default=DEFAULT_COST_MODEL, metavar="KIND|PATH",
                   help="xgb (default: XGBoost starting from the shipped model), xgb-scratch, "
                        "xgb-rank, bound, random, none, pretrained[:NAME] or a saved model")
    p.add_argument("--fusion", choices=FUSION_MODES, default="none")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(run=_run)


class ProgressBar:
    """A tqdm bar on stderr fed by the search's progress reports (``used`` of ``budget``)."""

    def __init__(self, enabled: bool) -> None:
        self.bar = None
        self.enabled = enabled

    def __call__(self, report: Progress) -> None:
        if not self.enabled:
            return
        if self.bar is None:
            from tqdm import tqdm

            self.bar = tqdm(total=report.budget, desc="measuring", unit="sim",
                            file=sys.stderr, dynamic_ncols=True, leave=False)
        self.bar.total = report.budget
        self.bar.update(report.used - self.bar.n)
        self.bar.set_postfix_str(f"{report.workload.op} best {report.best_ns:,.0f} ns",
                                 refresh=False)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _run(args: argparse.Namespace) -> int:
    from sim.hwio import load_hardware

    from ..database import open_database
    from ..frontend import get_model_config
    from ..report import TASK_HEADERS
    from ..tune import tune

    hw = load_hardware(args.hw)
    cfg = get_model_config(args.model)
    db = open_database(args.db)
    before = len(db)
    bar = ProgressBar(enabled=not args.quiet and sys.stderr.isatty())
    try:
        rep = tune(cfg, hw=hw, phase=args.phase, batch=args.batch, context=args.context,
                   trials=args.trials, workers=args.workers, db=db, seed=args.seed,
                   sampler=args.sampler, cost_model=args.cost_model, fusion=args.fusion,
                   progress=bar)
    except KeyboardInterrupt:
        bar.close()
        kept = len(db) - before
        print(f"autosched: interrupted; the {kept} measurement(s) of this run are committed to "
              f"{args.db}; rerun the same command to resume", file=sys.stderr)
        return 130
    finally:
        bar.close()
    print(f"{rep.model} {rep.phase} batch {rep.batch}, "
          f"{'context' if rep.phase == 'decode' else 'prompt'} {rep.context}, on {rep.hardware} "
          f"({rep.hardware_fingerprint[:12]}); sampler {rep.sampler}, cost model "
          f"{rep.cost_model}, {rep.measurements} new measurement(s), {rep.reused} reused "
          f"from {args.db}")
    print()
    print(table(TASK_HEADERS, rep.task_rows()))
    print()
    print(kv_table(rep.end_to_end_pairs()))
    if args.report:
        rep.write(args.report)
        print(f"\nreport written to {args.report}")
    return 0
