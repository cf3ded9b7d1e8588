"""The analytical bound of the point-wise families: the best placement's program bound."""

from __future__ import annotations

from typing import TYPE_CHECKING

from search_spaces import Workload
from sim.bound import bound as program_bound
from sim.hardware import Hardware

if TYPE_CHECKING:
    from ..base import Family

__all__ = ["pointwise_bound"]


def pointwise_bound(workload: Workload, hw: Hardware, low: Family) -> float:
    """Min over the space's placements of each placement's program bound (a host op's
    bound is its roofline): every point of the space is one placement."""
    points = list(low.space(workload, hw).enumerate())
    return min(program_bound(low.lower(workload, p, hw).program, hw).ns for p in points)
