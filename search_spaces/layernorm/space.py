"""The LayerNorm space: ``y = (x - mean) / sqrt(var + eps) * w + b`` over the last dim.

Workload family ``layernorm`` (dims ``m`` rows, ``n`` features; attr ``eps``). Every row
needs its mean and variance, reductions over values spread across banks and channels
that the PIM units cannot combine, and the scale and shift need those statistics first:
the banks have nothing to contribute, so the space has one parameter, ``placement``,
whose only value is ``host`` (one host op over all rows). A device with an in-bank
reduction would add ``pim`` here and a kernel beside the host one.
"""

from __future__ import annotations

from search_spaces.domains import Categorical
from search_spaces.errors import SpaceError
from search_spaces.params import Param
from search_spaces.space import Space
from search_spaces.workload import Workload
from sim.hardware import Hardware

__all__ = ["LAYERNORM_VERSION", "layernorm_default", "layernorm_space"]

LAYERNORM_VERSION = 1


def _check(workload: Workload) -> None:
    if workload.op != "layernorm":
        raise SpaceError(f"the layernorm space takes layernorm workloads, not {workload.key}")
    if float(workload.attr("eps", 1e-5)) <= 0:
        raise SpaceError(f"{workload.key}: eps must be positive")


def layernorm_space(workload: Workload, hw: Hardware) -> Space:
    """The placement space of ``workload`` on ``hw`` (host only; see the module)."""
    _check(workload)
    return Space("layernorm", LAYERNORM_VERSION, (Param("placement", Categorical(("host",))),))


def layernorm_default(workload: Workload, hw: Hardware) -> dict:
    """One host op over every row."""
    _check(workload)
    return {"placement": "host"}
