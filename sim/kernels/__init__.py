"""Hand-written kernels: PIM GEMV (every lowering choice in ``GemvOpts``), in-bank
element-wise ops, and the plain-memory GEMV baseline that PIM speed-ups are measured
against. Each builder returns a :class:`Kernel` (program + bindings + weight placement).
"""

from .base import Kernel
from .baseline import gemv_baseline
from .elementwise import BINARY_FNS, elementwise
from .gemv import gemv
from .gemv_layout import LOOP_ORDERS, GemvOpts, GemvPlan, plan_gemv

__all__ = [
    "BINARY_FNS",
    "LOOP_ORDERS",
    "GemvOpts",
    "GemvPlan",
    "Kernel",
    "elementwise",
    "gemv",
    "gemv_baseline",
    "plan_gemv",
]
