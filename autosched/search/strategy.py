"""The search strategy: the one part of a task's search that decides what to try next.

A :class:`~autosched.search.TaskTuner` owns a task (its space, measurements, pool of
lowered candidates, database and cost model) and runs every round the same way: the
strategy proposes candidate points, the cost model ranks them, the best few and a few
exploratory ones are measured, the results are committed and the strategy is told.
Strategies differ only in how they propose (:mod:`.optuna_search`: an Optuna sampler
through ask/tell beside the model's own neighbourhood moves; :mod:`.evolution`: a
population bred by the space's moves and crossover) and how they learn from results.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from typing import TYPE_CHECKING

from autosched.measure.record import Measurement

if TYPE_CHECKING:
    from .tuner import TaskTuner

from .errors import SearchError

__all__ = ["SearchStrategy", "check_unbound"]


class SearchStrategy(abc.ABC):
    """Proposes the schedules of one task worth measuring and learns from their results.

    Contract:

    - **One task per instance.** The tuner calls :meth:`bind` once, before anything else;
      :meth:`clone` gives an unbound copy with the same configuration. A
      :class:`~autosched.search.SearchContext` holds one unbound strategy and every task
      gets its own clone, so configuration is shared and state never is.
    - **Who owns what.** The strategy owns its own state (a study, a population). The
      task owns the space, the measurements (``task.measurements``, fastest via
      ``task.best``), the database and the cost model; the strategy reads them and never
      commits, measures or refits. Points go through the task's pool
      (``task.pool``): :meth:`propose` leaves each candidate pending there, valid (by
      :meth:`~autosched.search.pool.CandidatePool.check`), unmeasured and distinct, and
      lowered when the task has a cost model.
    - **Calls.** ``bind`` (the task already holds what the database had), then rounds
      of ``propose`` and ``update``, and ``observe`` whenever measurements made
      elsewhere appear (another process on the same job). ``update`` receives the
      measurements of the round's chosen points (the other pending points were dropped
      unmeasured); each measurement is committed before the strategy sees it.
    - **Determinism.** Given the task's seed (``task.seed``), the same database state
      and the same calls, a strategy proposes the same points: randomness comes only
      from generators seeded by the task (``task.rng``) or by ``task.seed``.
    - **Threads.** Not thread-safe: one task's rounds run on one thread; tasks that run
      at once each have their own instance.
    """

    name: str = "strategy"

    @abc.abstractmethod
    def clone(self) -> SearchStrategy:
        """An unbound copy with this strategy's configuration and none of its state."""

    @abc.abstractmethod
    def bind(self, task: TaskTuner) -> None:
        """Attach to ``task`` (once, before anything else) and learn what it has measured
        (``task.measurements``, of which ``task.expressible`` ones are points of its
        space); raise :class:`~autosched.search.SearchError` if the strategy cannot serve
        the task."""

    @abc.abstractmethod
    def propose(self, n_measure: int) -> list[dict]:
        """Make the candidates for the next ``n_measure`` measurements pending in
        ``task.pool`` and return their points (the tuner ranks every pending point and
        measures ``n_measure`` of them). The task's named points not yet measured
        (``task.named_due``: its default, the library kernel) come before the strategy's
        own, as many as ``n_measure`` allows. An empty list means the strategy found
        nothing new: the task is exhausted."""

    @abc.abstractmethod
    def update(self, measurements: Sequence[Measurement]) -> None:
        """Learn the results of the points chosen from the last proposal."""

    def observe(self, measurements: Sequence[Measurement]) -> None:  # noqa: B027
        """Learn measurements this strategy did not propose (earlier runs, other
        processes); by default they teach nothing beyond what the task keeps."""


def check_unbound(strategy: SearchStrategy) -> None:
    """Raise if ``strategy`` already serves a task (for :meth:`SearchStrategy.bind`)."""
    if getattr(strategy, "task", None) is not None:
        raise SearchError(f"the {strategy.name} strategy already serves a task; give each "
                          "task its own clone()")
