"""Lowering of ``layernorm`` (space: ``search_spaces.layernorm``): the host kernel."""

from __future__ import annotations

from autosched.codegen.lowering import Lowering
from search_spaces import Space, Workload
from search_spaces.layernorm import layernorm_default, layernorm_space
from sim.hardware import Hardware
from sim.kernels import Kernel

from .bound import layernorm_bound
from .kernel import layernorm_kernel

__all__ = ["LayerNormLowering"]


class LayerNormLowering(Lowering):
    """``layernorm``: one host op over every row (the space's only placement)."""

    families = ("layernorm",)

    def space(self, workload: Workload, hw: Hardware) -> Space:
        return layernorm_space(workload, hw)

    def default(self, workload: Workload, hw: Hardware) -> dict:
        return layernorm_default(workload, hw)

    def bound(self, workload: Workload, hw: Hardware) -> float:
        return layernorm_bound(workload, hw)

    def lower(self, workload: Workload, point: dict, hw: Hardware) -> Kernel:
        return layernorm_kernel(workload)
