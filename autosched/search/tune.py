"""``tune_tasks``: tune every task of a model on one hardware within one measurement budget."""

from __future__ import annotations

from collections.abc import Sequence

from search_spaces import Workload

from .context import SearchContext
from .errors import SearchError
from .results import TaskResult
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


def tune_tasks(tasks: Sequence, ctx: SearchContext) -> list[TaskResult]:
    """Tune ``tasks`` within ``ctx``; ``ctx.trials`` is this run's budget of *new*
    measurements.

    Reads top to bottom as the pipeline: the cost model's head start (the database's
    measurements of other workloads and hardware, :meth:`TrainingSet.add_history`), one
    tuner per task (its space, its strategy resumed from the database, its named points
    first), then the scheduler's rounds of propose, rank, measure, commit and update. A
    second run on the same database with the same context measures only schedules the
    first did not and stops once every space is exhausted. Same seed and same database
    state give the same measurements. With ``ctx.plans`` (alternative graphs of one
    step, e.g. fusion plans) the scheduler tunes only the tasks of the plans still in
    contention (:class:`~.scheduler.TaskScheduler`).
    """
    if not isinstance(ctx, SearchContext):
        raise SearchError(f"tune_tasks needs a SearchContext, got {type(ctx).__name__}; "
                          "build one with SearchContext.of(hardware=..., database=..., "
                          "runner=..., trials=...)")
    training = TrainingSet()
    merged = _pairs(tasks)
    if ctx.cost_model is not None:  # transfer: other tasks' measurements teach the first round
        mine = {f"{w.key}@{ctx.hardware.fingerprint}" for w, _ in merged}
        if training.add_history(ctx.database, known_hardware(ctx.hardware), mine,
                                limit=ctx.settings.history_limit):
            training.refit(ctx.cost_model)
    tuners = [TaskTuner(w, n, ctx, seed=ctx.seed + i, training=training)
              for i, (w, n) in enumerate(merged)]
    scheduler = ctx.scheduler(tuners, ctx)
    return scheduler.run(ctx.trials, ctx.progress)
