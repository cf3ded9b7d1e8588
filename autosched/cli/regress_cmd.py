"""``autosched regress``: run a versioned suite and compare it with the checked-in baseline.

Exit status: 0 when every case matches (or the baseline was updated), 1 when a case
moved (the cases and operators are named on stderr) or could not be measured, 2 on bad
input (unknown suite, a missing or malformed baseline, ``--update`` without a reason).
"""

from __future__ import annotations

import argparse
import sys
from fnmatch import fnmatchcase

from .numbers import integer, real
from .output import print_json, table


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("regress", help="performance-regression suite against the baseline")
    p.add_argument("--suite", default="quick", metavar="quick|full",
                   help="the suite to run (default quick)")
    p.add_argument("--cases", action="append", default=None, metavar="GLOB",
                   help="only the cases whose id matches (repeatable)")
    p.add_argument("--repeats", type=integer("--repeats"), default=None, metavar="N",
                   help="timed runs per case for the wall-clock medians (default: the suite's)")
    p.add_argument("--band", type=real("--band"), default=1.5, metavar="X",
                   help="wall-clock band: flag medians beyond X times the baseline (never fails)")
    p.add_argument("--baseline", default=None, metavar="PATH",
                   help="default: autosched/regress/data/baseline-<suite>.json")
    p.add_argument("--tuned", default=None, metavar="PATH",
                   help="tuned-schedule export (default: autosched/regress/data/tuned.json)")
    p.add_argument("--history", default=None, metavar="PATH",
                   help="default: autosched/regress/data/history-<suite>.jsonl")
    p.add_argument("--no-history", action="store_true", help="do not append to the history")
    p.add_argument("--plot", default=None, metavar="PNG", help="draw each case's history")
    p.add_argument("--update", action="store_true", help="rewrite the baseline (needs --reason)")
    p.add_argument("--reason", default=None, metavar="TEXT", help="why the figures changed")
    p.add_argument("--json", action="store_true")
    p.add_argument("--quiet", action="store_true", help="no per-case progress on stderr")
    p.set_defaults(run=_run)


def _progress(total: int, quiet: bool):
    done = [0]

    def report(case, result) -> None:
        done[0] += 1
        if not quiet:
            status = "error" if result.error else "done"
            print(f"[{done[0]}/{total}] {case.id}: {status}", file=sys.stderr, flush=True)
    return report


def _rel(v) -> str:
    before, now = v
    if before is None or now is None:
        return "-"
    if before == now:
        return "="
    return f"{now / before - 1:+.2%}" if before else "changed"


def _row(v) -> list:
    """Case, simulated latency (µs) before and now, its change, energy and bound changes,
    wall-clock medians against the baseline, verdict."""
    b, n = v.before, v.now

    def fig(r, name):
        return r.figures.get(name) if r is not None else None

    lat_b, lat_n = fig(b, "latency_ns"), fig(n, "latency_ns")
    wall = " ".join(f"{m.removesuffix('_s')} {now:.2f}s x{now / before:.2f}{'!' * bool(flag)}"
                    for m, before, now, flag in v.wall)
    return [v.case, "-" if lat_b is None else lat_b / 1e3, "-" if lat_n is None else lat_n / 1e3,
            _rel((lat_b, lat_n)), _rel((fig(b, "energy_pj"), fig(n, "energy_pj"))),
            _rel((fig(b, "bound_ns"), fig(n, "bound_ns"))), wall or "-", v.verdict]


def _baseline(args: argparse.Namespace, suite):
    """The baseline to compare with (a new empty one when ``--update`` creates it)."""
    from autosched.regress.baseline import Baseline, BaselineError, baseline_path

    path = args.baseline or baseline_path(suite.name)
    try:
        base = Baseline.load(path)
    except BaselineError:
        if not args.update:
            raise
        base = Baseline(suite.name, suite.version)
    if base.suite != suite.name:
        raise BaselineError(f"{path} is the baseline of suite {base.suite}, not {suite.name}")
    return base, path


def _print(args: argparse.Namespace, report, results, verdict: str, commit: dict) -> None:
    if args.json:
        print_json({**report.to_dict(), "verdict": verdict, **commit,
                    "results": {r.case: r.to_dict() for r in results}})
        return
    print(table(["case", "baseline", "now", "change", "energy", "bound", "wall (x baseline)",
                 "verdict"], [_row(v) for v in report.verdicts]))
    print("\nbaseline and now: simulated latency in µs; energy and bound: change; wall: "
          f"medians against the baseline's, ! beyond x{args.band:g} (never fails)")


PLOT_FORMATS = (".png", ".pdf", ".svg")


def _check_files(args: argparse.Namespace, runner, cases, suite: str) -> None:
    """Every file the run reads or writes, checked before any case runs: the tuned-schedule
    source, the history and the plot (regular files or new paths, a plot format)."""
    from autosched.regress.history import history_path
    from sim.errors import AutoschedError
    from sim.writes import check_target

    if any(getattr(c, "schedules", None) == "tuned" for c in cases):
        runner.tuned()
    if not args.no_history:
        check_target(args.history or history_path(suite), what="--history")
    if args.plot:
        if not str(args.plot).lower().endswith(PLOT_FORMATS):
            raise AutoschedError(f"--plot {args.plot[:80]}: name a {', '.join(PLOT_FORMATS)} "
                                 "file")
        check_target(args.plot, what="--plot")


def _run(args: argparse.Namespace) -> int:
    from autosched.regress import Runner, get_suite
    from autosched.regress.baseline import BaselineError
    from autosched.regress.compare import compare
    from autosched.regress.files import commit_of
    from autosched.regress.history import (
        append_history,
        history_entry,
        history_path,
        load_history,
        plot_history,
    )
    from autosched.regress.tuned import TUNED_PATH

    if args.update and not (args.reason and args.reason.strip()):
        raise BaselineError("--update needs --reason TEXT saying why the figures changed")
    suite = get_suite(args.suite)
    cases = [c for c in suite.cases
             if not args.cases or any(fnmatchcase(c.id, g) for g in args.cases)]
    if not cases:
        raise BaselineError(f"no case of suite {suite.name} matches {', '.join(args.cases)}")
    base, bpath = _baseline(args, suite)
    runner = Runner(repeats=args.repeats or suite.repeats, tuned=args.tuned or TUNED_PATH)
    _check_files(args, runner, cases, suite.name)

    # measure, compare, record
    results = runner.run_all(cases, _progress(len(cases), args.quiet or args.json))
    report = compare(base, results, band=args.band, suite_ids={c.id for c in suite.cases})
    commit = commit_of()
    errors = [r for r in results if not r.ok]
    updated = args.update and not errors
    if updated:
        gone = {v.case for v in report.verdicts if v.verdict == "gone"}
        changed = [v.case for v in report.verdicts if v.verdict != "ok"]
        base.without(gone).updated(results, suite_version=suite.version, reason=args.reason,
                                   commit=commit, changed=changed).save(bpath)
    verdict = "update" if updated else "fail" if report.failed else "pass"
    entry = history_entry(suite.name, suite.version, results, verdict, commit)
    hpath = args.history or history_path(suite.name)
    if not args.no_history:
        append_history(hpath, entry)

    # report
    _print(args, report, results, verdict, commit)
    if args.plot:
        entries = [entry] if args.no_history else load_history(hpath)
        out = plot_history(entries, args.plot, title=f"autosched regress --suite {suite.name}")
        print(f"plot: {out}", file=sys.stderr)
    if args.update:
        if errors:
            print(f"regress: baseline not updated: {len(errors)} case(s) could not be "
                  "measured\n" + report.summary(), file=sys.stderr)
            return 1
        print(f"regress: baseline {bpath} updated ({args.reason.strip()})", file=sys.stderr)
        return 0
    if report.failed:
        stale = "" if base.suite_version == suite.version else \
            f" (the baseline is of suite v{base.suite_version}, the suite is v{suite.version})"
        print(f"regress: {len(report.failing())} of {len(report.verdicts)} cases moved or "
              f"failed (suite {suite.name}){stale}:\n{report.summary()}\nif the change is "
              f"intended, run autosched regress --suite {suite.name} --update --reason TEXT",
              file=sys.stderr)
        return 1
    return 0
