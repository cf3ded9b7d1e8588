"""A space seen by Optuna and by the cost model: trial suggestions, distributions, features.

Optuna imports lazily, so a space can be built and walked without it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from search_spaces.errors import ScheduleError

if TYPE_CHECKING:
    import optuna

    from search_spaces.space import Space

__all__ = ["distributions", "feature_names", "features", "suggest"]

Point = dict[str, Any]


def suggest(space: Space, trial: optuna.trial.BaseTrial) -> Point:
    """Ask ``trial`` for each active parameter, define-by-run, in declaration order.

    Conditional parameters are suggested only when active, so the same call works with
    ``study.ask()``, ``optimize`` and every sampler. Constraints are not enforced here:
    the caller validates the point and reports an invalid one (e.g. tells the trial FAIL).
    """
    return space.fill(lambda p: p.domain.suggest(trial, p.name))


def _check_shape(space: Space, point: Point) -> None:
    reasons = space.validate(point, constraints=False)
    if reasons:
        raise ScheduleError(f"point does not fit space {space.name} v{space.version}: "
                            + "; ".join(reasons))


def distributions(space: Space, point: Point) -> dict[str, optuna.distributions.BaseDistribution]:
    """Distributions of ``point``'s active parameters, for ``optuna.trial.create_trial``.

    The same distributions :func:`suggest` uses, so a point measured elsewhere can be told
    to a study. Raises :class:`ScheduleError` if a value is outside its domain or a
    parameter is missing, unknown or inactive (constraints are not checked).
    """
    _check_shape(space, point)
    return {name: space.param(name).domain.to_optuna() for name in space.active(point)}


def feature_names(space: Space) -> tuple[str, ...]:
    """One name per feature slot: ``name`` for numeric parameters, ``name=choice`` one-hot."""
    return tuple(n for p in space.params for n in p.domain.feature_names(p.name))


def features(space: Space, point: Point) -> np.ndarray:
    """Float vector with a fixed length per space, slots in :func:`feature_names` order.

    Numeric parameters are their value, categorical ones one-hot; every slot of an inactive
    parameter is -1. Raises :class:`ScheduleError` like :func:`distributions`.
    """
    _check_shape(space, point)
    on = set(space.active(point))
    out: list[float] = []
    for p in space.params:
        out.extend(p.domain.encode(point[p.name] if p.name in on else None))
    return np.asarray(out, dtype=np.float64)
