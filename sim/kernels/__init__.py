"""Hand-written kernels: PIM GEMV (every lowering choice in ``GemvOpts``), in-bank
element-wise ops, and the plain-memory GEMV baseline that PIM speed-ups are measured
against. Each builder returns a :class:`Kernel` (program + bindings + weight placement).
"""

from .base import Kernel
from .baseline import baseline_reason, baseline_rows, gemv_baseline
from .elementwise import BINARY_FNS, elementwise
from .epilogue import Epilogue
from .gemv import gemv
from .gemv_layout import LOOP_ORDERS, GemvLayout, GemvOpts, gemv_layout_of
from .gemv_rules import GEMV_RULES, GemvRule, GemvShape, gemv_reasons

__all__ = [
    "BINARY_FNS",
    "GEMV_RULES",
    "LOOP_ORDERS",
    "GemvOpts",
    "GemvLayout",
    "GemvRule",
    "Epilogue",
    "GemvShape",
    "Kernel",
    "baseline_reason",
    "baseline_rows",
    "elementwise",
    "gemv",
    "gemv_baseline",
    "gemv_reasons",
    "gemv_layout_of",
]
