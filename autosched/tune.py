"""The tuning pipeline: model -> graph -> fusion plans -> tasks -> search -> db -> codegen.

``tune`` reads top to bottom in pipeline order. The per-task search (space, ask, predict,
measure, tell and commit) lives in :func:`autosched.search.tune_tasks`; this module wires
it between the frontend and the whole-model compiler and turns the result into a
:class:`~autosched.report.TuneReport`. Every measurement is committed as it lands, so an
interrupted run loses nothing and a rerun on the same database resumes.
"""

from __future__ import annotations

import importlib.util
import math
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from search_spaces import Workload
from sim.errors import AutoschedError
from sim.hardware import Hardware
from sim.hwio import load_hardware

from .codegen.lowering import lowering_for
from .database import Database, RecordKey, open_database
from .defaults import DB_DEFAULT, DEFAULT_CONTEXT, DEFAULT_TRIALS, SAMPLERS
from .report import EndToEnd, TaskReport, TuneReport

if TYPE_CHECKING:  # the frontend loads torch: imported on use, so the CLI starts fast
    from .frontend import ModelConfig, OpGraph, Task

__all__ = ["FUSION_MODES", "default_cost_model",
           "fusion_plans", "merge_tasks", "tune"]

FUSION_MODES = ("auto", "none")


def default_cost_model() -> str:
    """``"xgb"`` when the repository ships the cost-model registry, else ``"none"``."""
    return "xgb" if importlib.util.find_spec("cost_models.registry") else "none"


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


def merge_tasks(graphs: list[OpGraph]) -> list[Task]:
    """Unique workloads over several graphs; a workload's count is its largest per graph."""
    from .frontend import Task, tasks

    merged: dict[str, Task] = {}
    for g in graphs:
        for t in tasks(g):
            cur = merged.get(t.key)
            if cur is None or t.count > cur.count:
                roles = cur.roles if cur else ()
                merged[t.key] = Task(t.workload, t.count,
                                     roles + tuple(r for r in t.roles if r not in roles))
    return list(merged.values())


def _resolve_cost_model(kind: str | object | None, seed: int) -> tuple[object | None, str]:
    """(model instance or None, its name) for ``"xgb"``, ``"none"``/None or an instance."""
    if kind is None or kind == "none":
        return None, "none"
    if not isinstance(kind, str):
        return kind, getattr(kind, "name", type(kind).__name__)
    if importlib.util.find_spec("cost_models.registry") is None:
        raise AutoschedError(f"cost model {kind!r} is not available in this installation; "
                             "use --cost-model none")
    from cost_models.registry import make_cost_model

    return make_cost_model(kind, seed=seed), kind


def _reused(db: Database, workloads: list[Workload], hw: Hardware) -> int:
    """Records of these workloads on ``hw`` already stored (the search never repeats them)."""
    total = 0
    for w in workloads:
        space = lowering_for(w).space(w, hw)
        total += db.count(RecordKey.current(w, hw.fingerprint, space.name, space.version))
    return total


def tune(model: str | Path | ModelConfig, *, hw: str | Path | Hardware = "hbm-pim",
         phase: str = "decode", batch: int = 1, context: int | None = None,
         trials: int = DEFAULT_TRIALS, workers: int | None = None,
         db: str | Path | Database = DB_DEFAULT, seed: int = 0, sampler: str = "tpe",
         cost_model: str | object | None = None, fusion: str | dict | None = "none",
         progress: Callable | None = None, runner: str | object | None = None) -> TuneReport:
    """Tune every workload of one inference step of ``model`` on ``hw`` and report.

    ``context`` is the KV length for decode and the prompt length for prefill (default
    :data:`DEFAULT_CONTEXT`, capped at the model's max_positions). ``trials`` is the number
    of new measurements this run may spend over all tasks; ``workers`` defaults to all
    cores; ``cost_model`` None means :func:`default_cost_model`. With ``fusion="auto"``
    the tasks of every fusion plan share the budget and the plan with the best tuned
    end-to-end latency is reported (and stored when the database can hold plans).
    ``runner``: a Runner, or ``local`` / ``dask://host:port``. Processes tuning the same
    tasks with the same budget on one database share the job (``search.shared``).
    """
    from .compiler import model_graph, plain_memory_ns, simulate_model
    from .frontend import get_model_config
    from .search import tune_tasks
    from .search.shared import share

    start = time.perf_counter()
    if sampler not in SAMPLERS:
        raise AutoschedError(f"sampler {sampler!r} is not one of {', '.join(SAMPLERS)}")
    if not isinstance(trials, int) or trials < 0:
        raise AutoschedError(f"trials must be a non-negative integer, got {trials!r}")
    hardware = hw if isinstance(hw, Hardware) else load_hardware(hw)
    cfg = get_model_config(model)
    length = min(context or DEFAULT_CONTEXT, cfg.max_positions)
    database = open_database(db)
    cm, cm_name = _resolve_cost_model(default_cost_model() if cost_model is None else cost_model,
                                      seed)
    step = dict(phase=phase, batch=batch, context=length)

    # graph and fusion plan: one step captured, rewritten by every candidate plan
    # (model_graph is the compiler's own capture, so tuned workloads are the ones it looks up)
    plans = fusion_plans(fusion)
    graphs = [model_graph(cfg, fusion=p, **step)[1] for p in plans]

    # tasks: unique workloads over every plan, with occurrence counts
    task_list = merge_tasks(graphs)
    reused = _reused(database, [t.workload for t in task_list], hardware)

    # space, ask, predict, measure, tell and commit: one shared budget over all tasks
    job = share(database, [t.workload for t in task_list], hardware, trials)
    try:
        results = tune_tasks([(t.workload, t.count) for t in task_list], hardware,
                             db=job.database, trials=trials, workers=workers or os.cpu_count() or 1,
                             sampler=sampler, seed=seed, cost_model=cm, progress=progress,
                             runner=runner, gate=job)
    finally:
        job.close()
    measured = job.inserted  # this run's own records, whoever else writes to the database

    # codegen: whole-step figures, default schedules unfused vs tuned schedules per plan
    default = simulate_model(cfg, hardware, db=None, fusion={}, baseline=False, **step)
    tuned = [simulate_model(cfg, hardware, db=database, fusion=p or {}, baseline=False, **step)
             for p in plans]
    best_i = min(range(len(plans)), key=lambda i: tuned[i].latency_ns)
    best_plan, fig = plans[best_i], tuned[best_i]
    base_ns = plain_memory_ns(cfg, hardware, **step)
    if fusion == "auto":
        _store_plan(database, cfg.name, phase, batch, hardware, best_plan, fig.latency_ns)

    job.finish()  # results are safe: a later run starts a new job instead of resuming this
    by_key = {r.workload.key: r for r in results}
    task_reports = tuple(_task_report(by_key[t.key], t, hardware) for t in task_list)
    e2e = EndToEnd(default.latency_ns, fig.latency_ns, fig.bound_ns, base_ns,
                   fig.tokens_per_s, fig.energy_pj, best_plan)
    return TuneReport(
        model=cfg.name, hardware=hardware.name, hardware_fingerprint=hardware.fingerprint,
        phase=phase, batch=batch, context=length, trials=trials, seed=seed, sampler=sampler,
        cost_model=cm_name, fusion=fusion if isinstance(fusion, str) else "plan",
        measurements=measured, reused=reused, wall_s=time.perf_counter() - start,
        tasks=task_reports, end_to_end=e2e,
        plans=tuple((p, f.latency_ns) for p, f in zip(plans, tuned, strict=True)))


def _store_plan(db: Database, model: str, phase: str, batch: int, hw: Hardware,
                plan: dict | None, latency_ns: float) -> None:
    """Record the chosen fusion plan where ``compile``, ``simulate`` and ``run`` find it."""
    from .compiler import plan_key

    db.save_plan(plan_key(model, phase, batch), hw.fingerprint, plan or {}, latency_ns)


def _task_report(r: object, task: Task, hw: Hardware) -> TaskReport:
    """A TaskResult (from the search) as a report row."""
    default, best = r.default, r.best
    bound = best.bound_ns if best is not None and best.bound_ns > 0 else \
        lowering_for(task.workload).bound(task.workload, hw)
    return TaskReport(
        workload=task.workload, count=task.count,
        default_ns=default.latency_ns if default is not None else math.inf,
        tuned_ns=best.latency_ns if best is not None else math.inf, bound_ns=bound,
        measurements=int(r.measurements), schedule=best.schedule if best is not None else None,
        roles=task.roles)
