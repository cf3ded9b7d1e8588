"""``autosched tune --model NAME|config.json ...``: tune a model, print tables, write a report."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from typing import TYPE_CHECKING

from sim.errors import AutoschedError

from .checks import output_file, positive, write_atomic
from .numbers import integer, real
from .output import kv_table, table
from .steps import QUANTIZE_HELP, ROUTING_HELP, with_model_flags

if TYPE_CHECKING:
    from ..search import Progress


def register(sub: argparse._SubParsersAction) -> None:
    from ..defaults import DB_DEFAULT, DEFAULT_CONTEXT, DEFAULT_TRIALS, STRATEGIES
    from ..tune import DEFAULT_COST_MODEL, DEFAULT_FUSION, FUSION_MODES

    p = sub.add_parser("tune", help="tune every workload of a model and store the schedules")
    p.add_argument("--model", required=True, metavar="NAME|FILE",
                   help="a built-in model (see `autosched models`) or a config.json")
    p.add_argument("--hw", default="hbm-pim", metavar="NAME|FILE", help="default: hbm-pim")
    p.add_argument("--quantize", default=None, metavar="w8|w4g128",
                   help=QUANTIZE_HELP)
    p.add_argument("--routing", default=None, metavar="FILE", help=ROUTING_HELP)
    p.add_argument("--phase", type=_phases, default=["decode"], metavar="decode|prefill[,..]",
                   help="decode or prefill; a comma list tunes a serving profile")
    p.add_argument("--batch", type=_listed(integer("--batch")), default=[1], metavar="B[,..]",
                   help="sequences (a comma list: one bucket each)")
    p.add_argument("--context", type=_listed(integer("--context")), default=None,
                   metavar="L[,..]",
                   help=f"KV length (decode) or prompt length (prefill); default "
                        f"{DEFAULT_CONTEXT}; a comma list: one bucket each")
    p.add_argument("--trials", type=integer("--trials"), default=DEFAULT_TRIALS, metavar="N",
                   help=f"new measurements this run may spend (default {DEFAULT_TRIALS})")
    p.add_argument("--workers", type=integer("--workers"), default=None, metavar="N",
                   help=f"simulator processes of the local runner (default: all "
                        f"{os.cpu_count()} cores)")
    p.add_argument("--runner", default="local", metavar="local|dask://HOST:PORT",
                   help="where measurements run: the local process pool (default) or the "
                        "Dask cluster whose scheduler listens at HOST:PORT (tls://HOST:PORT: "
                        "over TLS, with the files below)")
    p.add_argument("--tls-ca-file", default=None, metavar="PEM",
                   help="TLS farm: the CA that signed the scheduler's certificate (default: "
                        "distributed's configuration, e.g. DASK_DISTRIBUTED__COMM__TLS__CA_FILE)")
    p.add_argument("--tls-cert", default=None, metavar="PEM",
                   help="TLS farm: this client's certificate (default: distributed's "
                        "configuration)")
    p.add_argument("--tls-key", default=None, metavar="PEM",
                   help="TLS farm: this client's key, unless the certificate file holds it")
    p.add_argument("--timeout", type=real("--timeout", open_low=True), default=None,
                   metavar="S",
                   help="time limit of one measurement in seconds; longer ones are "
                        "recorded as failures (default 300)")
    p.add_argument("--db", default=DB_DEFAULT, metavar="PATH|URL")
    p.add_argument("--report", default=None, metavar="FILE", help="write a JSON report")
    p.add_argument("--seed", type=integer("--seed"), default=0)
    p.add_argument("--sampler", choices=STRATEGIES, default="tpe",
                   help="search strategy: an Optuna sampler (default tpe) or evolutionary")
    p.add_argument("--cost-model", default=DEFAULT_COST_MODEL, metavar="KIND|PATH",
                   help="xgb (default: XGBoost starting from the shipped model), xgb-scratch, "
                        "xgb-rank, bound, random, none, pretrained[:NAME] or a saved model")
    p.add_argument("--fusion", choices=FUSION_MODES, default=DEFAULT_FUSION,
                   help=f"auto: search the fusion plan too; none: the unfused graph "
                        f"(default {DEFAULT_FUSION})")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(run=_run)


def _listed(one):
    """An argparse type: a comma list of ``one``'s values (one value: a list of one)."""
    def parse(text: str) -> list:
        return [one(part) for part in text.split(",")]

    parse.__name__ = getattr(one, "__name__", "value")
    return parse


def _phases(text: str) -> list[str]:
    out = [t.strip() for t in text.split(",")]
    bad = [t for t in out if t not in ("decode", "prefill")]
    if bad:
        raise argparse.ArgumentTypeError(f"invalid phase {bad[0]!r}: use decode or prefill, "
                                         "or a comma list of them")
    return out


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


def _check(args: argparse.Namespace, cfg) -> None:
    """Every flag checked before any work; a capped context is reported, not hidden."""
    from ..measure import check_runner

    for b in args.batch:
        positive(b, "--batch")
    for c in args.context or ():
        positive(c, "--context")
    positive(args.workers, "--workers")
    if args.trials < 0:
        raise AutoschedError(f"--trials must be >= 0, got {args.trials}")
    if args.timeout is not None and not args.timeout > 0:
        raise AutoschedError(f"--timeout must be > 0 seconds, got {args.timeout:g}")
    if check_runner(args.runner) is not None and args.workers is not None:
        raise AutoschedError("--workers sizes the local runner; a Dask cluster's workers are "
                             "started with `dask worker`")
    for c in args.context or ():
        if c > cfg.max_positions:
            print(f"autosched: note: --context {c} is capped to {cfg.max_positions}, "
                  f"{cfg.name}'s max_position_embeddings", file=sys.stderr)


def _run(args: argparse.Namespace) -> int:
    from sim.system import load_system

    from ..database import open_database
    from ..database.where import check_location
    from ..defaults import DEFAULT_CONTEXT
    from ..frontend import get_model_config
    from ..measure import TlsFiles, make_runner
    from ..pipeline import model_graph
    from ..report import TASK_HEADERS
    from ..tune import tune

    # every input checked before the database is opened (a refused tune creates nothing)
    check_location(args.db)  # a folder, a device, an in-memory URL: refused at once
    hw = load_system(args.hw)
    cfg = with_model_flags(get_model_config(args.model), args)
    _check(args, cfg)
    report = output_file(args.report, "--report", force=True) if args.report else None
    if args.cost_model != "none":
        from cost_models.registry import make_cost_model

        make_cost_model(args.cost_model, seed=args.seed)  # a missing or foreign file: now
    from ..tune_profile import buckets_of

    buckets = buckets_of(args.phase, args.batch, args.context or [DEFAULT_CONTEXT])
    for b in buckets:  # capture errors now (cached)
        model_graph(cfg, phase=b.phase, batch=b.batch,
                    context=min(b.context, cfg.max_positions))
    runner = make_runner(args.runner, args.workers, timeout=args.timeout,
                         tls=TlsFiles(args.tls_ca_file, args.tls_cert, args.tls_key))
    _quiet("distributed")  # a lost cluster is reported in one line, not by its log
    try:
        db = open_database(args.db)
    except BaseException:
        runner.close()
        raise
    before = len(db)
    bar = ProgressBar(enabled=not args.quiet and sys.stderr.isatty())
    settings = dict(hw=hw, workers=args.workers, db=db, seed=args.seed,
                    sampler=args.sampler, cost_model=args.cost_model, fusion=args.fusion,
                    progress=bar, runner=runner)
    try:
        if len(buckets) > 1:
            from ..tune_profile import tune_profile

            prof = tune_profile(cfg, buckets, trials=args.trials, **settings)
        else:
            b = buckets[0]
            rep = tune(cfg, phase=b.phase, batch=b.batch,
                       context=args.context[0] if args.context else None,
                       trials=args.trials, **settings)
    except KeyboardInterrupt:
        bar.close()
        print(f"autosched: interrupted; the {len(db) - before} measurement(s) committed since "
              f"this run started are kept in {db_label(db)}; rerun the same command to resume",
              file=sys.stderr)
        return 130
    finally:
        bar.close()
        runner.close()
    if len(buckets) > 1:
        return _print_profile(prof, report, args.report, db)
    print(f"{rep.model} {rep.phase} batch {rep.batch}, "
          f"{'context' if rep.phase == 'decode' else 'prompt'} {rep.context}, on {rep.hardware} "
          f"({rep.hardware_fingerprint[:12]}); sampler {rep.sampler}, cost model "
          f"{rep.cost_model}, {rep.measurements} new measurement(s), {rep.reused} reused "
          f"from {db_label(db)}")
    print()
    print(table(TASK_HEADERS, rep.task_rows()))
    print()
    print(kv_table(rep.end_to_end_pairs()))
    if report is not None:
        write_atomic(report, lambda p: p.write_text(json.dumps(rep.to_dict(), indent=2) + "\n"))
        print(f"\nreport written to {args.report}")
    return 0


def _print_profile(prof, report, where: str | None, db) -> int:
    """One row per bucket of a serving profile, then the run's totals."""
    rows = [[r.phase, r.batch, r.context, r.measurements, r.reused, r.end_to_end.default_ns,
             r.end_to_end.tuned_ns, r.end_to_end.speedup,
             r.end_to_end.tuned_ns / r.end_to_end.bound_ns, r.end_to_end.placement,
             r.end_to_end.schedules] for r in prof.reports]
    print(f"serving profile of {prof.reports[0].model} on {prof.reports[0].hardware}: "
          f"{len(prof.reports)} buckets, {prof.measurements} new measurement(s) in "
          f"{prof.wall_s:.1f} s, plans stored per bucket in {db_label(db)}")
    print()
    print(table(["phase", "batch", "context", "new", "reused", "default ns", "tuned ns",
                 "speedup", "tuned / bound", "placement", "schedules"], rows))
    if report is not None:
        write_atomic(report, lambda p: p.write_text(json.dumps(prof.to_dict(), indent=2)
                                                    + "\n"))
        print(f"\nreport written to {where}")
    return 0


def _quiet(package: str) -> None:
    for name in [package, *logging.root.manager.loggerDict]:
        if name == package or name.startswith(package + "."):
            logging.getLogger(name).setLevel(logging.CRITICAL)


def db_label(db) -> str:
    """How to name a database in messages (its path, or its URL without password)."""
    return getattr(db, "where", str(db))
