"""The prologue, epilogue and bias attributes of a gemv/gemm workload, checked."""

from __future__ import annotations

from search_spaces import Workload
from sim.errors import check

__all__ = ["gemv_attrs"]


def gemv_attrs(w: Workload) -> tuple[bool, str, bool]:
    """(rmsnorm prologue, epilogue "" | "add" | "silu_mul", bias) of ``w``, checked."""
    pro, epi, bias = w.attr("prologue", ""), w.attr("epilogue", ""), int(w.attr("bias", 0))
    check(pro in ("", "rmsnorm"), f"gemv prologue {pro!r} unknown: use rmsnorm or none")
    check(epi in ("", "add", "silu_mul"), f"gemv epilogue {epi!r} unknown: use add or silu_mul")
    check(bias in (0, 1), f"gemv attr bias must be 0 or 1, got {bias}")
    check(epi != "silu_mul" or w.dims["n"] % 2 == 0, "epilogue silu_mul needs an even n")
    return pro == "rmsnorm", epi, bool(bias)
