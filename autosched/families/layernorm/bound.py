"""The analytical bound of ``layernorm``: its only placement's program bound (the host
op's dispatch plus roofline)."""

from __future__ import annotations

from search_spaces import Workload
from sim.bound import bound
from sim.hardware import Hardware

from .kernel import layernorm_kernel

__all__ = ["layernorm_bound"]


def layernorm_bound(workload: Workload, hw: Hardware) -> float:
    """No schedule beats the one host op of the space's one point."""
    return bound(layernorm_kernel(workload).program, hw).ns
