"""The gemv and gemm families: the library GEMV (or the plain-memory path) with host
prologue and epilogue, and the family's bound."""

from .attrs import gemv_attrs
from .bound import gemv_bound, gemv_bound_terms
from .lowering import GemvLowering

__all__ = ["GemvLowering", "gemv_attrs", "gemv_bound", "gemv_bound_terms"]
