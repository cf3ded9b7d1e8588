"""The analytical bound of attention over a KV cache."""

from __future__ import annotations

import math

from search_spaces import Workload
from search_spaces.attention import shape_of
from sim.bound import refresh_span_ns
from sim.hardware import DTYPE_BYTES, Hardware

__all__ = ["attention_bound", "attention_bound_terms"]


def attention_bound(workload: Workload, hw: Hardware) -> float:
    """Scores, then softmax, then p v: each product at its fastest placement, ignoring
    every overhead.

    A product touches K (or V) whole over the live cache slots (``min(l, span)``: a
    sliding window bounds them). On PIM every query row meets every live position's
    columns (a head dim rounded up to whole columns) in a column command of its own (one
    global-buffer operand per command): those commands spread over every unit of the
    device at one per unit column slot (the simulator's whole cycles); for p v, whose
    operand is one probability per position, a command can feed only the units that
    hold that position's columns (``min(units, columns)`` of a channel), one per command
    slot of the channel's command bus; and the average bank activates, precharges and
    reads its rows (each read once per query row), stretched by the all-bank refreshes
    the span must hold. On the host: the unpadded elements over the external bus of
    every channel. One host op's dispatch at least follows the scores: the whole-row
    softmax before p v, or with a staged softmax (``softmax_stages``, each stage's
    softmax behind the banks' products) the merge of the stages after it.
    """
    t = attention_bound_terms(workload, hw)
    return (min(t["pim_k"] + t["refresh_k"], t["bus"]) +
            min(t["pim_v"] + t["refresh_v"], t["bus"]) + t["host_op"])


def attention_bound_terms(workload: Workload, hw: Hardware) -> dict[str, float]:
    """Best-case ns of the scores (``pim_k``, and the refreshes that span holds,
    ``refresh_k``) and of p v (``pim_v``, ``refresh_v``) in the banks, of streaming K (or
    V) over the external bus (``bus``), of the host's whole-row softmax (``softmax``:
    ``b*q*h*live`` fp32 read and written) and of one host op's dispatch (``host_op``);
    see :func:`attention_bound`."""
    dm, sh = workload.dims, shape_of(workload, hw)
    live = min(dm["l"], sh.span)
    elems = dm["b"] * dm["kvh"] * live * dm["d"]
    cmds = dm["b"] * dm["q"] * dm["h"] * live * sh.cols  # one per (query row, column)
    C, U = hw.org.channels, hw.units_per_channel
    t, tck = hw.timing, hw.org.tck_ns
    unit_ns = hw.column_elems / hw.pim.lanes * 1e3 / hw.pim.clock_mhz
    unit_ns = max(1, math.ceil(unit_ns / tck - 1e-9)) * tck  # issued on whole cycles
    spread = max(math.ceil(cmds / (C * U)) - 1, 0) * unit_ns
    # a bank activates every row it holds (one-bank units cannot hide it): the average
    # bank's rows, each tRCD before its columns and tRP after, which the busiest cannot beat
    banks = C * hw.org.banks_per_channel
    rows = elems * hw.elem_bytes / hw.org.row_bytes / banks
    bank_col = hw.pim_column_ns if hw.pim.banks_per_unit == 1 else t.tccd_l * tck
    rows_ns = ((rows * t.trcd_mac + max(rows - 1, 0) * t.trp) * tck +
               max(cmds / banks - rows, 0) * bank_col)
    pim_k = max(spread, rows_ns)
    # p v: a command's probability feeds only the units holding that position's columns
    feeds = C * min(U, sh.cols)
    pim_v = max(pim_k, max(math.ceil(cmds / feeds) - 1, 0) * t.tccd_s * tck)
    bus = elems * hw.elem_bytes / hw.external_bandwidth_gbps
    n = dm["b"] * dm["q"] * dm["h"] * live
    soft = hw.host.op_ns(5 * n, 2 * n * DTYPE_BYTES["fp32"])
    return {"pim_k": pim_k, "refresh_k": refresh_span_ns(hw, pim_k) - pim_k,
            "pim_v": pim_v, "refresh_v": refresh_span_ns(hw, pim_v) - pim_v, "bus": bus,
            "softmax": soft, "host_op": hw.host.op_overhead_ns}
