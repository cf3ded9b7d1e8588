"""The analytical bound of attention over a KV cache."""

from __future__ import annotations

import math

from search_spaces import Workload
from search_spaces.attention import shape_of
from sim.hardware import DTYPE_BYTES, Hardware

__all__ = ["attention_bound", "attention_bound_terms"]


def attention_bound(workload: Workload, hw: Hardware) -> float:
    """Scores, then softmax, then p v: each its fastest placement, ignoring every overhead.

    K and V must each be touched whole over the live cache slots (``min(l, span)``: a
    sliding window bounds them): on PIM one column per position's column (a head dim
    rounded up to whole columns) per unit column slot over every unit of the device, or
    the unpadded elements over the external bus of every channel. The softmax reads and
    writes ``b*q*h*live`` fp32 on the host after the scores and before p v.
    """
    t = attention_bound_terms(workload, hw)
    return 2 * min(t["pim"], t["bus"]) + t["softmax"]


def attention_bound_terms(workload: Workload, hw: Hardware) -> dict[str, float]:
    """Best-case ns of touching K (or V) whole in the banks (``pim``) or over the external
    bus (``bus``), and of the host's softmax (``softmax``); see :func:`attention_bound`."""
    dm, sh = workload.dims, shape_of(workload, hw)
    live = min(dm["l"], sh.span)
    elems = dm["b"] * dm["kvh"] * live * dm["d"]
    columns = dm["b"] * dm["kvh"] * live * sh.cols
    units = hw.units_per_channel * hw.org.channels
    unit_ns = hw.column_elems / hw.pim.lanes * 1e3 / hw.pim.clock_mhz
    pim = max(math.ceil(columns / units) - 1, 0) * unit_ns
    bus = elems * hw.elem_bytes / hw.external_bandwidth_gbps
    n = dm["b"] * dm["q"] * dm["h"] * live
    soft = hw.host.op_ns(5 * n, 2 * n * DTYPE_BYTES["fp32"])
    return {"pim": pim, "bus": bus, "softmax": soft}
