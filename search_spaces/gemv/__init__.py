"""The GEMV/GEMM family's schedule space (its geometry is ``sim.kernels``' GEMV layout)."""

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

__all__ = ["GEMV_VERSION", "default_layout", "gemv_default", "gemv_library", "gemv_modes",
           "gemv_space", "point_opts", "resident_layout"]
