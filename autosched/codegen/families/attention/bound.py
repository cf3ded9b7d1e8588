"""The analytical bound of attention over a KV cache."""

from __future__ import annotations

import math

from search_spaces import Workload
from sim.hardware import DTYPE_BYTES, Hardware

__all__ = ["attention_bound", "attention_bound_terms"]


def attention_bound(workload: Workload, hw: Hardware) -> float:
    """Scores, then softmax, then p v: each its fastest placement, ignoring every overhead.

    K and V must each be touched whole: on PIM one 16-element column per unit column slot
    over every unit of the device, or over the external bus of every channel. The softmax
    reads and writes ``b*q*h*l`` fp32 on the host after the scores and before p v.
    """
    t = attention_bound_terms(workload, hw)
    return 2 * min(t["pim"], t["bus"]) + t["softmax"]


def attention_bound_terms(workload: Workload, hw: Hardware) -> dict[str, float]:
    """Best-case ns of touching K (or V) whole in the banks (``pim``) or over the external
    bus (``bus``), and of the host's softmax (``softmax``)."""
    dm = workload.dims
    elems = dm["b"] * dm["kvh"] * dm["l"] * dm["d"]
    units = hw.units_per_channel * hw.org.channels
    unit_ns = hw.column_elems / hw.pim.lanes * 1e3 / hw.pim.clock_mhz
    pim = max(math.ceil(elems / hw.column_elems / units) - 1, 0) * unit_ns
    bus = elems * hw.elem_bytes / hw.external_bandwidth_gbps
    n = dm["b"] * dm["q"] * dm["h"] * dm["l"]
    soft = hw.host.op_overhead_ns + max(5 * n / hw.host.peak_gflops,
                                        2 * n * DTYPE_BYTES["fp32"] / hw.host.bandwidth_gbps)
    return {"pim": pim, "bus": bus, "softmax": soft}
