"""The GEMV/GEMM family's schedule space (its geometry is ``sim.kernels``' GEMV layout).

Workloads: ``gemv`` (m: rows of the activation, batch x tokens, small; n: outputs; k:
inputs) and ``gemm`` (the same over many rows).
"""

from search_spaces.gemv.space import (
    GEMV_VERSION,
    default_layout,
    gemv_default,
    gemv_library,
    gemv_modes,
    gemv_space,
    point_opts,
    resident_layout,
)

DIMS = {"gemv": ("m", "n", "k"), "gemm": ("m", "n", "k")}

__all__ = ["DIMS", "GEMV_VERSION", "default_layout", "gemv_default", "gemv_library", "gemv_modes",
           "gemv_space", "point_opts", "resident_layout"]
