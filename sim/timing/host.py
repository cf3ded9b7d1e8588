"""The host engine: one in-order processor timed by its roofline, in nanoseconds."""

from __future__ import annotations

from ..hardware import Hardware
from ..host_ops import cost
from ..isa import HostOp
from .stats import N_COUNTERS, Count

__all__ = ["HostEngine", "host_op_args"]


def host_op_args(op: HostOp, hw: Hardware, dtypes: dict[str, str]) -> tuple[float, float, float]:
    """(duration ns, FLOPs, bytes) of one host op:
    ``op_overhead_ns + max(flops / peak_gflops, bytes / bandwidth_gbps)``."""
    flops, nbytes = cost(op, dtypes)
    return hw.host.op_ns(flops, nbytes), flops, nbytes


class HostEngine:
    """State of a host stream: the time it is free (ns) and its counters."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.t = 0.0
        self.ctr: list = [0] * N_COUNTERS
        self.learnt: dict = {}  # loop extrapolation's memory, per compiled loop

    def host_op(self, env: dict, a: tuple[float, float, float]) -> None:
        dur, flops, nbytes = a
        self.t += dur
        ctr = self.ctr
        ctr[Count.HOST] += 1
        ctr[Count.HOST_FLOPS] += flops
        ctr[Count.HOST_BYTES] += nbytes
        ctr[Count.HOST_BUSY] += dur

    # ---- stream interface (engine) -------------------------------------------------
    def now(self) -> float:
        return self.t

    def signal_ns(self) -> float:
        return self.t

    def wait_until(self, ns: float) -> None:
        self.t = max(self.t, ns)

    def signature(self, gb_dep: bool) -> tuple:
        """The host carries no timers: every iteration boundary looks alike."""
        return ()

    def shift(self, delta: float) -> None:
        self.t += delta

    def bound(self) -> float:
        return float("inf")
