"""Strategies and task schedulers by name: the one place that wires names to classes.

Names are listed in :mod:`autosched.defaults` (the command line offers them without
importing the search); ``tpe`` is the default strategy, ``gain`` the default scheduler.
"""

from __future__ import annotations

from collections.abc import Callable

from optuna.samplers import BaseSampler

from ..defaults import SAMPLERS, SCHEDULERS, STRATEGIES
from .errors import SearchError
from .evolution import EvolutionarySearch
from .gain import GainScheduler
from .optuna_search import OptunaSearch
from .round_robin import RoundRobinScheduler
from .scheduler import TaskScheduler
from .strategy import SearchStrategy

__all__ = ["SCHEDULERS", "STRATEGIES", "make_scheduler", "make_strategy"]

_SCHEDULERS: dict[str, type[TaskScheduler]] = {"gain": GainScheduler,
                                               "round-robin": RoundRobinScheduler}


def make_strategy(kind: str | SearchStrategy | BaseSampler = "tpe") -> SearchStrategy:
    """The unbound strategy called ``kind``: an Optuna sampler's name (``tpe``, ``random``,
    ``cmaes``, ``nsga2``, ``motpe``: :class:`OptunaSearch`) or ``evolutionary``
    (:class:`EvolutionarySearch`); an Optuna sampler instance drives an
    :class:`OptunaSearch`; a strategy instance passes through."""
    if isinstance(kind, SearchStrategy):
        return kind
    if isinstance(kind, BaseSampler) or kind in SAMPLERS:
        return OptunaSearch(kind)
    if kind == "evolutionary":
        return EvolutionarySearch()
    raise SearchError(f"unknown search strategy {kind!r}; choose one of "
                      f"{', '.join(STRATEGIES)}, or pass a SearchStrategy or an optuna "
                      "sampler instance")


def make_scheduler(kind: str | Callable[..., TaskScheduler] = "gain"
                   ) -> Callable[..., TaskScheduler]:
    """The task scheduler class called ``kind`` (``gain``, ``round-robin``); a class or
    factory taking (tuners, context) passes through."""
    if isinstance(kind, str):
        if kind not in _SCHEDULERS:
            raise SearchError(f"unknown task scheduler {kind!r}; choose one of "
                              f"{', '.join(SCHEDULERS)}")
        return _SCHEDULERS[kind]
    if callable(kind):
        return kind
    raise SearchError(f"a task scheduler is a name or a TaskScheduler class, got {kind!r}")
