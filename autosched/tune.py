"""The tuning pipeline: model -> graph -> fusion plans -> tasks -> search -> db -> codegen.

``tune`` reads top to bottom in pipeline order. The per-task search (space, ask, predict,
measure, tell and commit) lives in :func:`autosched.search.tune_tasks`; this module wires
it between the frontend and the whole-model compiler and turns the result into a
:class:`~autosched.report.TuneReport`. Every measurement is committed as it lands, so an
interrupted run loses nothing and a rerun on the same database resumes.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from search_spaces import Workload
from search_spaces.fusion import fusion_default
from sim.errors import AutoschedError, SimError
from sim.hardware import Hardware

from .database import Database, RecordKey, open_database
from .defaults import DB_DEFAULT, DEFAULT_CONTEXT, DEFAULT_TRIALS, STRATEGIES
from .families import family_of
from .ir import PlanKey, PlanKind, Step
from .report import EndToEnd, TaskReport, TuneReport

if TYPE_CHECKING:  # the frontend loads torch: imported on use, so the CLI starts fast
    from .frontend import ModelConfig
    from .ir import Task

__all__ = ["DEFAULT_COST_MODEL", "DEFAULT_FUSION", "FUSION_MODES", "fusion_plans", "tune"]

FUSION_MODES = ("auto", "none")
DEFAULT_FUSION = "auto"  # the fusion plan is a searched decision like any schedule
DEFAULT_COST_MODEL = "xgb"  # XGBoost regression starting from the shipped trees
# Plans simulated whole at the end, the best estimates first: at least FINALISTS, and up
# to MAX_FINALISTS while a plan's estimate is within FINALIST_SPREAD of the best. The
# estimate adds the tasks' tuned latencies and so ignores host/PIM overlap, which moves
# the whole step by up to 15 % (llama-tiny decode at batch 8: two plans of equal
# estimate simulate to 37.7 and 34.9 us).
FINALISTS, MAX_FINALISTS, FINALIST_SPREAD = 3, 8, 1.10


def default_plan(fusion: str | dict | None) -> dict:
    """The fusion plan of the default step ``tune`` compares with: what an untuned compile
    uses (every fusion on) when the plan is searched, else the plan asked for."""
    if isinstance(fusion, dict):
        return dict(fusion)
    return fusion_default() if fusion == "auto" else {}


def fusion_plans(fusion: str | dict | None) -> list[dict | None]:
    """The plans to compare: ``none`` -> [None]; ``auto`` -> every point of the fusion space."""
    if fusion is None or fusion == "none":
        return [None]
    if isinstance(fusion, dict):
        return [dict(fusion)]
    if fusion != "auto":
        raise AutoschedError(f"fusion {fusion!r} is not one of {', '.join(FUSION_MODES)}")
    from search_spaces.fusion import fusion_space

    return [dict(p) for p in fusion_space().enumerate()]


def _cost_model(kind: str | object | None, seed: int) -> tuple[object | None, str]:
    """(model instance or None, its name) for a registry kind or path, ``"none"``/None, or
    an instance."""
    if kind is None or kind == "none":
        return None, "none"
    if not isinstance(kind, str):
        return kind, getattr(kind, "name", type(kind).__name__)
    from cost_models.registry import make_cost_model

    return make_cost_model(kind, seed=seed), kind


def _reused(db: Database, workloads: list[Workload], hw: Hardware) -> int:
    """Records of these workloads on ``hw`` already stored (the search never repeats them)."""
    total = 0
    for w in workloads:
        space = family_of(w).space(w, hw)
        total += db.count(RecordKey.current(w, hw.fingerprint, space.name, space.version))
    return total


def tune(model: str | Path | ModelConfig, *, hw: str | Path | Hardware = "hbm-pim",
         phase: str = "decode", batch: int = 1, context: int | None = None,
         trials: int = DEFAULT_TRIALS, workers: int | None = None,
         db: str | Path | Database = DB_DEFAULT, seed: int = 0, sampler: str = "tpe",
         cost_model: str | object | None = DEFAULT_COST_MODEL,
         fusion: str | dict | None = DEFAULT_FUSION,
         progress: Callable | None = None, runner: str | object | None = None,
         carry: Sequence[tuple[dict | None, str]] = ()) -> TuneReport:
    """Tune every workload of one inference step of ``model`` on ``hw`` and report.

    ``context`` is the KV length for decode and the prompt length for prefill (default
    :data:`~autosched.defaults.DEFAULT_CONTEXT`, capped at the model's max_positions).
    ``trials`` is the number of new measurements this run may spend over all tasks;
    ``workers`` defaults to all cores; ``cost_model`` is a registry kind, a saved model's
    path, an instance, or None/"none". With ``fusion="auto"`` (the default) every fusion
    plan is a candidate: the warm-up measures the default schedule of every task of every
    plan, and the budget then goes to the tasks of the plans still in contention (their
    estimate with the cost model's predicted bests can still beat the best plan's); the
    plans with the best tuned estimates (``FINALISTS``, more while within
    ``FINALIST_SPREAD`` of the best) are simulated whole. The best of them then competes,
    whole step against whole step, with the default step (default schedules, every
    fusion on: what compile gives with nothing stored),
    with its own plan under every placement and with its plan on the default schedules;
    only the winner is stored (fusion and placement plans, and where its schedules come
    from), so the step compiled from the database is never slower than the default.
    ``fusion="none"`` tunes the unfused graph alone (and stores that plan).
    ``carry``: (fusion plan, placement) pairs that won related steps (a serving profile's
    earlier buckets); each is one more whole-step candidate, on the tuned schedules.
    ``runner``: a Runner (the caller closes it), or ``local`` / ``dask://host:port``
    (opened and closed here). ``sampler`` names the search strategy: an Optuna sampler
    or ``evolutionary`` (:data:`~autosched.defaults.STRATEGIES`). Each input (hardware,
    model, database, cost model, runner, strategy) is resolved once and passed on as an
    object, the search's in one :class:`~autosched.search.SearchContext`.
    Processes tuning the same tasks with the same budget on one database share the job
    (``search.shared``).
    """
    from sim.system import load_system

    from .compiler import (
        PLACEMENTS,
        Partition,
        choose_partition,
        partition_graph,
        pin_graph,
        plain_memory_ns,
        simulate_step,
        unfit_reason,
    )
    from .frontend import get_model_config
    from .ir import tasks
    from .measure import Runner, make_runner
    from .pipeline import step_of
    from .search import SearchContext, tune_tasks
    from .search.shared import share

    start = time.perf_counter()
    if sampler not in STRATEGIES:
        raise AutoschedError(f"sampler {sampler!r} is not one of {', '.join(STRATEGIES)}")
    if not isinstance(trials, int) or trials < 0:
        raise AutoschedError(f"trials must be a non-negative integer, got {trials!r}")

    # inputs, resolved once
    system = load_system(hw)
    hardware = system.device
    cfg = get_model_config(model)
    step = step_of(cfg, phase=phase, batch=batch,
                   context=min(context or DEFAULT_CONTEXT, cfg.max_positions))
    rows = choose_partition(step, system)
    if (why := unfit_reason(step, system, rows)) is not None:
        raise SimError(why + "; nothing was measured")
    database = open_database(db)
    cm, cm_name = _cost_model(cost_model, seed)
    ranked = [r for r in rows if r["fits"]]
    part = ranked[0]["partition"] if ranked else Partition.single(cfg.layers)

    # graph: one step captured, rewritten by every candidate fusion plan (one device's
    # share of it on a system); multi-row GEMVs read their weights in the resident
    # layout, as compile does
    plans = fusion_plans(fusion)
    graphs = [pin_graph(partition_graph(step, part, p), hardware, database) for p in plans]

    # tasks: the unique workloads over every plan, with occurrence counts, and each plan's
    task_list = tasks(*graphs)
    per_plan = [{t.key: t.count for t in tasks(g)} for g in graphs]
    reused = _reused(database, [t.workload for t in task_list], hardware)

    # space, ask, predict, measure, tell and commit: one shared budget over all tasks
    job = share(database, [t.workload for t in task_list], hardware, trials)
    own = not isinstance(runner, Runner)
    run = make_runner(runner, workers or os.cpu_count() or 1) if own else runner
    try:
        search = SearchContext.of(hardware=hardware, database=job.database, runner=run,
                                  trials=trials, strategy=sampler, cost_model=cm, seed=seed,
                                  plans=per_plan if len(plans) > 1 else None, gate=job,
                                  progress=progress)
        results = tune_tasks(task_list, search)
    finally:
        if own:
            run.close()
        job.close()
    measured = job.inserted  # this run's own records, whoever else writes to the database

    # codegen: whole-step candidates, each simulated; the default step is one of them,
    # so the plan stored is never slower than the default
    by_key = {r.workload.key: r for r in results}
    est = [sum(n * _best_ns(by_key[k]) for k, n in p.items()) for p in per_plan]
    final = finalists(est)
    default = simulate_step(step, system, fusion=default_plan(fusion), baseline=False,
                            partition=part)
    tuned = {i: simulate_step(step, system, db=database, fusion=plans[i] or {},
                              baseline=False, placement="auto", partition=part)
             for i in final}
    best_i = min(final, key=lambda i: (tuned[i].latency_ns, i))
    best_plan = plans[best_i]
    cands = _candidates(step, system, database, best_plan, part, default, tuned[best_i],
                        simulate_step, PLACEMENTS, default_plan(fusion), carry)
    win = min(cands, key=lambda c: (c.fig.latency_ns, cands.index(c)))
    fig = win.fig
    base_ns = plain_memory_ns(step, system, partition=part)
    # stored only now, after the whole step was compared: compile, simulate and run
    # find the winner's fusion plan, placement and schedule source
    _store_plan(database, step, hardware, win.plan, fig.latency_ns)
    database.save_plan(str(PlanKey.of(PlanKind.PLACEMENT, step)), hardware.fingerprint,
                       win.stored(), fig.latency_ns)

    job.finish()  # results are safe: a later run starts a new job instead of resuming this
    task_reports = tuple(_task_report(by_key[t.key], t, hardware) for t in task_list)
    e2e = EndToEnd(default.latency_ns, fig.latency_ns, fig.bound_ns, base_ns,
                   fig.tokens_per_s, fig.energy_pj, win.plan, win.placement, win.schedules)
    return TuneReport(
        model=cfg.name, hardware=system.name, hardware_fingerprint=hardware.fingerprint,
        phase=phase, batch=batch, context=step.context, trials=trials, seed=seed, sampler=sampler,
        cost_model=cm_name, fusion=fusion if isinstance(fusion, str) else "plan",
        measurements=measured, reused=reused, wall_s=time.perf_counter() - start,
        tasks=task_reports, end_to_end=e2e,
        search_s=sum(r.search_s for r in results), measure_s=sum(r.measure_s for r in results),
        plans=tuple((plans[i], tuned[i].latency_ns if i in tuned else math.nan, est[i])
                    for i in sorted(range(len(plans)), key=lambda i: (est[i], i))))


@dataclass(frozen=True)
class Candidate:
    """One whole-step candidate of the final comparison: a fusion plan, a placement plan,
    where the schedules come from (``tuned``: the database; ``default``: the families'
    defaults, as an untuned compile) and its simulated figures."""

    plan: dict | None
    placement: str
    schedules: str
    fig: object

    def stored(self) -> dict:
        """The placement plan as stored (``schedules`` only when not the tuned ones)."""
        d = {"placement": self.placement}
        if self.schedules != "tuned":
            d["schedules"] = self.schedules
        return d


def _candidates(step: Step, system: object, db: Database, plan: dict | None, part: object,
                default: object, tuned: object, simulate_step: Callable,
                placements: tuple[str, ...], base: dict,
                carry: Sequence[tuple[dict | None, str]] = ()) -> list[Candidate]:
    """Every candidate of the final comparison, the default step (plan ``base``, default
    schedules) first (ties keep it):
    the best finalist's plan with its tuned schedules under every placement, and with the
    default schedules, then each carried (plan, placement) on the tuned schedules; a
    candidate that does not compile or fit is left out."""
    out = [Candidate(base, "auto", "default", default),
           Candidate(plan, "auto", "tuned", tuned)]
    tries = [(plan, p, db, "tuned") for p in placements if p != "auto"]
    tries += [(plan, "auto", None, "default")] if plan else []
    tries += [(p, where, db, "tuned") for p, where in carry]
    for fplan, where, database, source in tries:
        if any((c.plan or {}) == (fplan or {}) and (c.placement, c.schedules) ==
               (where, source) for c in out):
            continue  # a carried pair this comparison already has
        try:
            fig = simulate_step(step, system, db=database, fusion=fplan or {},
                                baseline=False, placement=where, ops=False, partition=part)
        except AutoschedError:
            continue
        out.append(Candidate(fplan, where, source, fig))
    return out



def finalists(estimates: list[float]) -> list[int]:
    """Indices of the plans to simulate whole, best estimate first: the first
    ``FINALISTS``, then up to ``MAX_FINALISTS`` in all while within ``FINALIST_SPREAD`` of
    the best estimate."""
    ranked = sorted(range(len(estimates)), key=lambda i: (estimates[i], i))
    return [i for n, i in enumerate(ranked[:MAX_FINALISTS])
            if n < FINALISTS or estimates[i] <= FINALIST_SPREAD * estimates[ranked[0]]]


def _best_ns(r: object) -> float:
    """A task result's best latency (its default's when nothing better succeeded)."""
    return r.best.latency_ns if r.best is not None else math.inf


def _store_plan(db: Database, step: Step, hw: Hardware, plan: dict | None,
                latency_ns: float) -> None:
    """Record the chosen fusion plan where ``compile``, ``simulate`` and ``run`` find it."""
    db.save_plan(str(PlanKey.of(PlanKind.FUSION, step)), hw.fingerprint, plan or {},
                 latency_ns)



def _task_report(r: object, task: Task, hw: Hardware) -> TaskReport:
    """A TaskResult (from the search) as a report row."""
    default, best = r.default, r.best
    bound = best.bound_ns if best is not None and best.bound_ns > 0 else \
        family_of(task.workload).bound(task.workload, hw)
    return TaskReport(
        workload=task.workload, count=task.count,
        default_ns=default.latency_ns if default is not None else math.inf,
        tuned_ns=best.latency_ns if best is not None else math.inf, bound_ns=bound,
        measurements=int(r.measurements), schedule=best.schedule if best is not None else None,
        roles=task.roles, new=int(r.new), predicted_gain_ns=float(r.predicted_gain_ns))
