"""The analytical bound of the gemv and gemm families: no schedule of the space beats it."""

from __future__ import annotations

from search_spaces import Workload
from sim.hardware import Hardware
from sim.kernels.gemv_bound import gemv_terms

from .attrs import gemv_attrs

__all__ = ["gemv_bound", "gemv_bound_terms"]


def gemv_bound_terms(workload: Workload, hw: Hardware) -> dict[str, float]:
    """Best-case ns per resource and placement (``sim.kernels.gemv_bound.gemv_terms``,
    with the workload's prologue and epilogue); the bound is the smaller placement."""
    pro, epi, bias = gemv_attrs(workload)
    d = workload.dims
    return gemv_terms(hw, d["m"], d["n"], d["k"], prologue=bool(pro), epilogue=bool(bias or epi))


def gemv_bound(workload: Workload, hw: Hardware) -> float:
    """Lower bound in ns over every point of the gemv space (see gemv_bound_terms)."""
    return gemv_bound_terms(workload, hw)["bound"]
