"""Regenerate the tuned-schedule export the regression suite's tuned cases compile with.

For every (model, preset, step) of the suite's tuned cases: ``autosched.tune`` with the
fusion plans those cases use (none, full) into one tuning database (resumed: ``--trials``
new measurements per step and plan on top of what it holds), then the best
schedule of every workload of those graphs goes to ``autosched/regress/data/tuned.json``
(merged with the entries already there, so regenerating one suite keeps the other's).
The suite then needs ``autosched regress --update --reason ...`` for the figures that moved.

``--named-only`` searches nothing: it measures every named point (each family's default
and the shipped library kernel) of those workloads that the database lacks, then exports;
the tuner measures named points first, so this brings a database tuned before a family
gained its library point up to the same rule (no exported schedule slower than the
library kernel) without a new search.

``--only GLOB`` searches only the workloads whose key matches ``GLOB`` (``fnmatch``) in
those graphs, ``--trials`` new measurements per step over them (a workload of several
plans searched once; their named points first), e.g. the workloads a new fusion created,
without moving any other entry.

    python -m experiments.regress_tune [--suite quick|full|all] [--db PATH] [--trials N]
                                       [--named-only | --only GLOB]
"""

from __future__ import annotations

import argparse
import fnmatch
import time
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

from autosched.database import Database, open_database
from autosched.families import family_of
from autosched.ir import tasks
from autosched.measure import LocalRunner, MeasureInput, measure_one
from autosched.pipeline import model_graph
from autosched.regress import ModelCase, TunedExport, export_from_db, get_suite, resolve_model
from autosched.regress.files import commit_of
from autosched.regress.suites import SUITES
from autosched.regress.tuned import TUNED_PATH, TunedExportError
from autosched.search import SearchContext, tune_tasks
from autosched.tune import tune
from cost_models.registry import make_cost_model
from search_spaces import Schedule, Workload
from search_spaces.fusion import FULL_FUSION
from sim import SIM_VERSION
from sim.hardware import Hardware
from sim.hwio import load_hardware


def tuned_steps(suites: list[str]) -> dict[tuple, set[str]]:
    """(model, hw, phase, batch, context) -> fusion plans of the tuned cases there."""
    steps: dict[tuple, set[str]] = defaultdict(set)
    for name in suites:
        for c in get_suite(name).cases:
            if isinstance(c, ModelCase) and c.schedules == "tuned":
                steps[(c.model, c.hw, c.phase, c.batch, c.context)].add(c.fusion)
    return steps


def measure_named(db: Database, workloads: Iterable[Workload], hw: Hardware) -> int:
    """Measure and store every named point of ``workloads`` on ``hw`` the database lacks;
    returns how many were measured."""
    todo = []
    for w in workloads:
        low = family_of(w)
        space = low.space(w, hw)
        for point in low.named_points(w, hw).values():
            s = Schedule.of(space, point)
            if db.find(w, hw.fingerprint, s, SIM_VERSION) is None:
                todo.append(MeasureInput(w, s, hw))
    db.commit_many(measure_one(i) for i in todo)
    return len(todo)


def carry_over(db: Database, export: TunedExport, workloads: Iterable[Workload],
               hw: Hardware) -> int:
    """Measure and store, under the current space version and simulator, each exported
    schedule of ``workloads`` on ``hw`` that the database lacks and that is still valid in
    its space (an export made before a space's version changed keeps its tuned points);
    returns how many were measured."""
    entries = export.hardware.get(hw.name, ("", {}))[1]
    todo = []
    for w in workloads:
        e = entries.get(w.key)
        if e is None:
            continue
        space = family_of(w).space(w, hw)
        if e.schedule.space != space.name or space.validate(e.schedule.point):
            continue
        s = Schedule.of(space, e.schedule.point)
        if db.find(w, hw.fingerprint, s, SIM_VERSION) is None:
            todo.append(MeasureInput(w, s, hw))
    db.commit_many(measure_one(i) for i in todo)
    return len(todo)


def search_only(db: Database, graphs: list, hw: Hardware, pattern: str, trials: int,
                seed: int) -> int:
    """Search the workloads of ``graphs`` (one step's plans) whose key matches ``pattern``,
    ``trials`` new measurements over them (the tuner measures their named points first);
    returns how many workloads matched."""
    chosen = [t for t in tasks(*graphs) if fnmatch.fnmatch(t.workload.key, pattern)]
    if chosen:
        with LocalRunner() as runner:
            tune_tasks(chosen, SearchContext.of(hardware=hw, database=db, runner=runner,
                                                trials=trials, seed=seed,
                                                cost_model=make_cost_model("xgb", seed=seed)))
    return len(chosen)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--suite", choices=(*SUITES, "all"), default="all")
    ap.add_argument("--db", default="experiments/.cache/regress_tune.db")
    ap.add_argument("--trials", type=int, default=96)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(TUNED_PATH))
    ap.add_argument("--named-only", action="store_true",
                    help="measure the missing named points (default, library), no search")
    ap.add_argument("--only", metavar="GLOB",
                    help="search only the workloads whose key matches GLOB")
    args = ap.parse_args()
    if args.named_only and args.only:
        ap.error("--named-only and --only exclude each other")
    Path(args.db).parent.mkdir(parents=True, exist_ok=True)
    db = open_database(args.db)
    suites = list(SUITES) if args.suite == "all" else [args.suite]
    try:
        export = TunedExport.load(args.out)
    except TunedExportError:
        export = TunedExport()
    run = {"suite": args.suite, "trials": 0 if args.named_only else args.trials,
           **({"only": args.only} if args.only else {}),
           "seed": args.seed, "cost_model": "xgb", "sampler": "tpe", "named_points": True,
           **commit_of(), "date": time.strftime("%Y-%m-%d")}
    tuning = {"runs": [*export.tuning.get("runs", []), run]}  # every run on the database
    for (model, hw_name, phase, batch, context), fusions in sorted(tuned_steps(suites).items()):
        cfg, hw = resolve_model(model), load_hardware(hw_name)
        step = dict(phase=phase, batch=batch, context=context)
        workloads, graphs = {}, []
        t_step = time.perf_counter()
        for fusion in sorted(fusions):
            plan = dict(FULL_FUSION) if fusion == "full" else "none"
            t0 = time.perf_counter()
            graph = model_graph(cfg, fusion=plan if isinstance(plan, dict) else {}, **step)[1]
            workloads.update({n.workload.key: n.workload for n in graph})
            graphs.append(graph)
            if args.named_only:
                ws = {n.workload for n in graph}
                n, kept = measure_named(db, ws, hw), carry_over(db, export, ws, hw)
                print(f"{model} {hw_name} {phase} b{batch} c{context} fusion={fusion}: "
                      f"{n} named points and {kept} exported schedules measured, "
                      f"{time.perf_counter() - t0:.0f} s", flush=True)
                continue
            if args.only:
                continue  # searched once per step below, over every plan's graph
            rep = tune(cfg, hw=hw, trials=args.trials, db=db, seed=args.seed, fusion=plan,
                       **step)
            print(f"{model} {hw_name} {phase} b{batch} c{context} fusion={fusion}: "
                  f"{rep.measurements} measurements, default "
                  f"{rep.end_to_end.default_ns / 1e3:.2f} us, tuned "
                  f"{rep.end_to_end.tuned_ns / 1e3:.2f} us, {time.perf_counter() - t0:.0f} s",
                  flush=True)
        if args.only:
            n = search_only(db, graphs, hw, args.only, args.trials, args.seed)
            print(f"{model} {hw_name} {phase} b{batch} c{context}: {n} workload(s) searched, "
                  f"{time.perf_counter() - t_step:.0f} s", flush=True)
        # with --only, the searched workloads' entries move and every other stays as it was
        chosen = [w for k, w in workloads.items()
                  if not args.only or fnmatch.fnmatch(k, args.only)]
        export = export.merged(export_from_db(db, chosen, hw, tuning))
    export.save(args.out)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
