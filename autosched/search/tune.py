"""``tune_tasks``: tune every task of a model on one hardware within one measurement budget."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from optuna.samplers import BaseSampler

from cost_models.base import CostModel
from search_spaces import Workload
from sim.hardware import Hardware

from ..database import Database, open_database
from ..measure import Runner, make_runner
from .scheduler import Progress, TaskResult, TaskScheduler
from .shared import Gate
from .study import SearchError
from .training import TrainingSet, known_hardware
from .tuner import TaskTuner

__all__ = ["tune_tasks"]


def _pairs(tasks: Sequence) -> list[tuple[Workload, int]]:
    """(workload, count) of each task: a pair or an object with ``.workload`` and
    ``.count`` (``autosched.frontend.Task``). Tasks are unique by workload: the frontend's
    ``tasks()`` is the one place that de-duplicates."""
    out: dict[str, tuple[Workload, int]] = {}
    for t in tasks:
        w, n = (t.workload, t.count) if hasattr(t, "workload") else t
        if not isinstance(w, Workload) or not isinstance(n, int) or n < 1:
            raise SearchError(f"a task is (Workload, count >= 1), got {t!r}")
        if w.key in out:
            raise SearchError(f"workload {w.key} is listed twice; give each task once "
                              "(autosched.frontend.tasks merges graphs)")
        out[w.key] = (w, n)
    return list(out.values())


def tune_tasks(tasks: Sequence, hw: Hardware, *, db: Database | str, trials: int,
               workers: int | None = None, sampler: str | BaseSampler = "tpe", seed: int = 0,
               cost_model: CostModel | None = None,
               progress: Callable[[Progress], None] | None = None,
               multi_objective: bool = False, runner: Runner | str | None = None,
               storage: str | None = None, warmup: int = 4, batch: int = 8,
               gate: Gate | None = None) -> list[TaskResult]:
    """Tune ``tasks`` on ``hw``; ``trials`` is this run's budget of *new* measurements.

    Reads top to bottom as the pipeline: database, runner, the cost model's head start
    (the database's measurements of other workloads and hardware,
    :meth:`TrainingSet.add_history`), one tuner per task (its space, its study resumed
    from the database, its default enqueued), then the scheduler's
    rounds of ask, rank, measure, commit and tell. A second run on the same database with
    the same arguments measures only schedules the first did not and stops once every
    space is exhausted. Same seed and same database state give the same measurements.
    ``runner`` overrides the local pool of ``workers`` processes (the caller closes it);
    a string (``local``, ``dask://host:port``) names one this call opens and closes.
    ``gate`` shares the work with other processes (:func:`autosched.search.shared.share`).
    """
    if not isinstance(trials, int) or trials < 0:
        raise SearchError(f"trials must be an int >= 0, got {trials!r}")
    database = open_database(db)
    own = not isinstance(runner, Runner)
    run = make_runner(runner, workers) if own else runner
    try:
        training = TrainingSet()
        merged = _pairs(tasks)
        if cost_model is not None:  # transfer: other tasks' measurements teach the first round
            mine = {f"{w.key}@{hw.fingerprint}" for w, _ in merged}
            if training.add_history(database, known_hardware(hw), mine):
                training.refit(cost_model)
        tuners = [TaskTuner(w, n, hw, db=database, runner=run, sampler=sampler,
                            seed=seed + i, cost_model=cost_model, training=training,
                            multi_objective=multi_objective, storage=storage)
                  for i, (w, n) in enumerate(merged)]
        scheduler = TaskScheduler(tuners, run, seed=seed, warmup=warmup, batch=batch, gate=gate)
        return scheduler.run(trials, progress)
    finally:
        if own:
            run.close()
