"""The analytical bound of attention over a KV cache."""

from __future__ import annotations

import math

from search_spaces import Workload
from search_spaces.attention import shape_of
from sim.bound import refresh_span_ns
from sim.hardware import DTYPE_BYTES, Hardware

__all__ = ["attention_bound", "attention_bound_terms"]


def attention_bound(workload: Workload, hw: Hardware) -> float:
    """Scores, then softmax, then p v: each its fastest placement, ignoring every overhead.

    K and V must each be touched whole over the live cache slots (``min(l, span)``: a
    sliding window bounds them): on PIM one column per position's column (a head dim
    rounded up to whole columns) per unit column slot (the simulator's whole cycles) over
    every unit of the device, or, when longer, the average bank's row activations,
    precharges and columns, stretched by the all-bank refreshes that span must hold,
    or the unpadded elements over the external bus of every channel. The softmax reads
    and writes ``b*q*h*live`` fp32 on the host after the scores and before p v.
    """
    t = attention_bound_terms(workload, hw)
    return 2 * min(t["pim"] + t["pim_refresh"], t["bus"]) + t["softmax"]


def attention_bound_terms(workload: Workload, hw: Hardware) -> dict[str, float]:
    """Best-case ns of touching K (or V) whole in the banks (``pim``, and the refreshes
    that span holds, ``pim_refresh``) or over the external bus (``bus``), and of the
    host's softmax (``softmax``); see :func:`attention_bound`."""
    dm, sh = workload.dims, shape_of(workload, hw)
    live = min(dm["l"], sh.span)
    elems = dm["b"] * dm["kvh"] * live * dm["d"]
    columns = dm["b"] * dm["kvh"] * live * sh.cols
    units = hw.units_per_channel * hw.org.channels
    tck = hw.org.tck_ns
    unit_ns = hw.column_elems / hw.pim.lanes * 1e3 / hw.pim.clock_mhz
    unit_ns = max(1, math.ceil(unit_ns / tck - 1e-9)) * tck  # issued on whole cycles
    pim = max(math.ceil(columns / units) - 1, 0) * unit_ns
    # a bank activates every row it holds (one-bank units cannot hide it): the average
    # bank's rows, each tRCD before its columns and tRP after, which the busiest cannot beat
    t, banks = hw.timing, hw.org.channels * hw.org.banks_per_channel
    rows = elems * hw.elem_bytes / hw.org.row_bytes / banks
    bank_col = hw.pim_column_ns if hw.pim.banks_per_unit == 1 else t.tccd_l * tck
    pim = max(pim, (rows * t.trcd_mac + max(rows - 1, 0) * t.trp) * tck +
              max(columns / banks - rows, 0) * bank_col)
    bus = elems * hw.elem_bytes / hw.external_bandwidth_gbps
    n = dm["b"] * dm["q"] * dm["h"] * live
    soft = hw.host.op_ns(5 * n, 2 * n * DTYPE_BYTES["fp32"])
    return {"pim": pim, "pim_refresh": refresh_span_ns(hw, pim) - pim, "bus": bus,
            "softmax": soft}
