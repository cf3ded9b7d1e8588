"""Headline figures of the library GEMV: latency, bound, plain-memory baseline, counters."""

from __future__ import annotations

import time

from .bound import bound
from .errors import AutoschedError
from .hardware import Hardware, require_hardware
from .kernels import gemv, gemv_baseline
from .timing import simulate

__all__ = ["LIBRARY", "gemv_figures"]


def gemv_figures(hw: Hardware, n: int, k: int, batch: int = 1) -> dict[str, object]:
    """Simulate the library GEMV ``y[batch, n] = x[batch, k] W^T`` and its baseline."""
    for name, v in (("out", n), ("in", k), ("batch", batch)):
        if not isinstance(v, int) or v <= 0:
            raise AutoschedError(f"{name} must be a positive integer, got {v!r}")
    hw = require_hardware(hw, "gemv_figures")
    kern = gemv(hw, n, k, batch)
    t0 = time.perf_counter()
    res = simulate(kern.program, hw)
    wall = time.perf_counter() - t0
    base = simulate(gemv_baseline(hw, n, k, batch).program, hw)
    return {
        "hw": hw.name,
        "out": n,
        "in": k,
        "batch": batch,
        "latency_ns": res.latency_ns,
        "bound_ns": bound(kern.program, hw).ns,
        "baseline_ns": base.latency_ns,
        "speedup": base.latency_ns / res.latency_ns,
        "energy_pj": res.energy_pj,
        "commands": res.total_commands,
        "row_hits": res.row_hits,
        "row_misses": res.row_misses,
        "sim_wall_s": wall,
    }


# the library kernels ``autosched sim KERNEL --out N --in K`` times: name -> (figures of
# (hardware, n, k, batch), what it computes)
LIBRARY = {"gemv": (gemv_figures, "y = W x with the library GEMV kernel")}
