"""The gemv and gemm family: the library GEMV (or the plain-memory path) with host prologue
and epilogue, its bound, its resident weight layouts, fitting and fusion rules."""

from .attrs import gemv_attrs
from .bound import gemv_bound, gemv_bound_terms
from .family import GemvFamily
from .lowering import gemv_kernel

__all__ = ["GemvFamily", "gemv_attrs", "gemv_bound", "gemv_bound_terms", "gemv_kernel"]
