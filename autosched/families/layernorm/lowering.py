"""The ``layernorm`` family (space: ``search_spaces.layernorm``): the host kernel, its
constants and its reference semantics."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from search_spaces import Space, Workload
from search_spaces.layernorm import layernorm_default, layernorm_space
from sim.hardware import Hardware
from sim.kernels import Kernel

from ..base import Family
from ..common import layer_norm, norm_bias, norm_weight
from .bound import layernorm_bound
from .kernel import layernorm_kernel

__all__ = ["LayerNormFamily"]

Arr = np.ndarray


class LayerNormFamily(Family):
    """``layernorm``: one host op over every row (the space's only placement)."""

    ops: ClassVar[tuple[str, ...]] = ("layernorm",)

    def space(self, workload: Workload, hw: Hardware) -> Space:
        return layernorm_space(workload, hw)

    def recognisers(self) -> tuple:
        from .pattern import layernorm, layernorm_heads

        return ((29, layernorm_heads), (30, layernorm))

    def default(self, workload: Workload, hw: Hardware) -> dict:
        return layernorm_default(workload, hw)

    def bound(self, workload: Workload, hw: Hardware) -> float:
        return layernorm_bound(workload, hw)

    def lower(self, workload: Workload, point: dict, hw: Hardware) -> Kernel:
        return layernorm_kernel(workload)

    def constants(self, source: Any, node: Any, positions: Arr) -> dict[str, Arr]:
        n = node.workload.dims["n"] * int(node.workload.attr("heads", 1))
        return {"w": norm_weight(source, node, "w", n).reshape(-1),
                "b": norm_bias(source, node, "b", n)}

    def reference(self, node, ops, tensors, env) -> Arr:
        x, eps = ops["x"], float(node.workload.attr("eps", 1e-5))
        heads, n = int(node.workload.attr("heads", 1)), x.shape[-1]
        w, b = (np.asarray(tensors[k]).reshape(heads, n) for k in ("w", "b"))
        return layer_norm(x.reshape(-1, heads, n), w, b, eps).reshape(x.shape)
