"""A space seen by the cost model: a fixed-length feature vector per point.

The search library's view of a space (distributions, suggestions) is not here: it lives
with the strategy that uses it (``autosched.search.optuna_adapter``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from search_spaces.errors import ScheduleError

if TYPE_CHECKING:
    from search_spaces.space import Space

__all__ = ["check_shape", "feature_names", "features"]

Point = dict[str, Any]


def check_shape(space: Space, point: Point) -> None:
    """Raise :class:`ScheduleError` if a value of ``point`` is outside its domain or a
    parameter is missing, unknown or inactive (constraints are not checked)."""
    reasons = space.validate(point, constraints=False)
    if reasons:
        raise ScheduleError(f"point does not fit space {space.name} v{space.version}: "
                            + "; ".join(reasons))


def feature_names(space: Space) -> tuple[str, ...]:
    """One name per feature slot: ``name`` for numeric parameters, ``name=choice`` one-hot."""
    return tuple(n for p in space.params for n in p.domain.feature_names(p.name))


def features(space: Space, point: Point) -> np.ndarray:
    """Float vector with a fixed length per space, slots in :func:`feature_names` order.

    Numeric parameters are their value, categorical ones one-hot; every slot of an inactive
    parameter is -1. Raises :class:`ScheduleError` like :func:`check_shape`.
    """
    check_shape(space, point)
    on = set(space.active(point))
    out: list[float] = []
    for p in space.params:
        out.extend(p.domain.encode(point[p.name] if p.name in on else None))
    return np.asarray(out, dtype=np.float64)
