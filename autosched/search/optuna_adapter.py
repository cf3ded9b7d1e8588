"""A schedule space seen by Optuna: distributions, define-by-run suggestions, trials back.

The space language (:mod:`search_spaces`) knows no search library: a domain is an
integer range (:class:`~search_spaces.IntRange`: bounds, step, log scale) or a finite
list of values. This adapter maps the first to Optuna's ``IntDistribution`` and
``suggest_int``, every other domain to a categorical over its values, and reads trials
back as points, so the Optuna-driven strategy (:mod:`.optuna_search`) and the study
mirror (:mod:`.mirror`) speak to Optuna through one module.
"""

from __future__ import annotations

from typing import Any

import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution, IntDistribution
from optuna.trial import BaseTrial, FrozenTrial, TrialState

from search_spaces import Domain, IntRange, Schedule, Space
from search_spaces.encoding import check_shape

__all__ = ["distribution", "distributions", "finished_trial", "schedule_of", "suggest"]

Point = dict[str, Any]


def distribution(domain: Domain) -> BaseDistribution:
    """The Optuna distribution of ``domain``: an int one for an integer range, else a
    categorical over its values in the domain's order."""
    if isinstance(domain, IntRange):
        return IntDistribution(domain.lo, domain.hi, log=domain.log, step=domain.step)
    return CategoricalDistribution(domain.values())


def _ask(trial: BaseTrial, name: str, domain: Domain) -> Any:
    if isinstance(domain, IntRange):
        return trial.suggest_int(name, domain.lo, domain.hi, step=domain.step, log=domain.log)
    return trial.suggest_categorical(name, domain.values())


def suggest(space: Space, trial: BaseTrial) -> Point:
    """Ask ``trial`` for each active parameter, define-by-run, in declaration order.

    Conditional parameters are suggested only when active, so the same call works with
    ``study.ask()``, ``optimize`` and every sampler. Constraints are not enforced here:
    the caller validates the point and reports an invalid one (e.g. tells the trial FAIL).
    """
    return space.fill(lambda p: _ask(trial, p.name, p.domain))


def distributions(space: Space, point: Point) -> dict[str, BaseDistribution]:
    """Distributions of ``point``'s active parameters, for ``optuna.trial.create_trial``.

    The same distributions :func:`suggest` uses, so a point measured elsewhere can be told
    to a study. Raises :class:`~search_spaces.ScheduleError` if a value is outside its
    domain or a parameter is missing, unknown or inactive (constraints are not checked).
    """
    check_shape(space, point)
    return {name: distribution(space.param(name).domain) for name in space.active(point)}


def finished_trial(space: Space, point: Point, values: list[float] | None,
                   user_attrs: dict[str, Any] | None = None) -> FrozenTrial:
    """A finished trial of ``point`` for ``study.add_trial``: ``COMPLETE`` with ``values``,
    or ``FAIL`` when ``values`` is None (a failed measurement)."""
    return optuna.trial.create_trial(
        params=point, distributions=distributions(space, point), values=values,
        state=TrialState.COMPLETE if values is not None else TrialState.FAIL,
        user_attrs=user_attrs or {})


def schedule_of(space: Space, trial: FrozenTrial) -> Schedule:
    """The schedule a trial of ``space``'s study stands for (read back from its params)."""
    return Schedule.of(space, trial.params)
