"""Best-case time of a GEMV per resource and placement: the GEMV family's bound, and the
figures its default compares to pick the faster side."""

from __future__ import annotations

import math

from ..bound import refresh_span_ns
from ..hardware import DTYPE_BYTES, Hardware
from .gemv_layout import GemvLayout

__all__ = ["gemv_terms", "layout_estimate_ns"]


def gemv_terms(hw: Hardware, m: int, n: int, k: int, *, prologue: bool = False,
               epilogue: bool = False) -> dict[str, float]:
    """Best-case ns per resource and placement of ``y[m, n] = x[m, k] @ W[n, k]^T``; the
    bound is the smaller placement total.

    pim (all-unit MACs, as every point of the GEMV space issues): ``columns`` = MAC column
    commands per channel (m x n x k / column elements over all units) x the shortest
    spacing of two all-bank column commands; ``banks`` = one bank's activations (tRCD_MAC
    each, tRP between) plus its MACs beyond the first of each row, at the average load,
    which the busiest bank cannot beat (it opens at least one row); ``refresh`` = the
    all-bank refreshes the longer of those two must hold (``sim.bound.refresh_span_ns``);
    ``tail`` = after the last column, its MAC pipeline and one read-out of a register of
    every unit (:func:`_tail_ns`); ``bus`` = input broadcast
    plus read-out bytes per channel on average over the channel bus; plus one host op
    after the read-out (and one before the start with a norm ``prologue``). host:
    every weight byte over the external bus, then the matmul (roofline + dispatch), then
    one more op for any ``epilogue`` (bias, residual add, gating).
    """
    org, t, tck, ov = hw.org, hw.timing, hw.org.tck_ns, hw.host.op_overhead_ns
    eb, ab = hw.elem_bytes, DTYPE_BYTES[hw.pim.accum_dtype]
    banks = org.channels * org.banks_per_channel
    per_ch = m * n * k / hw.column_elems / (org.channels * hw.units_per_channel)
    rows = max(n * k * eb / org.row_bytes / banks, 1.0)  # a bank with data opens a row
    cols = m * n * k / hw.column_elems / banks
    bank_col = hw.pim_column_ns if hw.pim.banks_per_unit == 1 else t.tccd_l * tck
    pim = {
        "pim_columns": max(math.ceil(per_ch) - 1, 0) * hw.pim_column_ns,
        "pim_banks": (rows * t.trcd_mac + (rows - 1) * t.trp) * tck + (cols - rows) * bank_col,
        "pim_bus": m * (k * eb + n * ab) / org.channels / hw.channel_bus_gbps,
    }
    busy = max(pim["pim_columns"], pim["pim_banks"])
    pim["pim_refresh"] = refresh_span_ns(hw, busy) - busy
    pim["pim_tail"] = _tail_ns(hw)
    pim_total = max(busy + pim["pim_refresh"] + pim["pim_tail"], pim["pim_bus"]) + \
        ov * (1 + prologue)
    mm = max(2 * m * n * k / hw.host.peak_gflops,
             ((m * k + n * k) * eb + m * n * 4) / hw.host.bandwidth_gbps)
    host = {"host_weights": n * k * eb / hw.external_bandwidth_gbps, "host_matmul": mm + ov}
    host_total = sum(host.values()) + ov * epilogue
    return {**pim, "pim": pim_total, **host, "host": host_total,
            "bound": min(pim_total, host_total)}


def _tail_ns(hw: Hardware) -> float:
    """From the last MAC column to the read-out data on the bus, as the simulator times it:
    the column burst and the unit's pipeline, the read latency, and one register of every
    unit of the channel (each point reads every unit out)."""
    tck, p = hw.org.tck_ns, hw.pim
    pipe = math.ceil(p.mac_latency_cycles * 1e3 / p.clock_mhz / tck - 1e-9)
    reg = p.register_lanes * DTYPE_BYTES[p.accum_dtype] * hw.units_per_channel
    xfer = math.ceil(reg / hw.channel_bus_gbps / tck - 1e-9)
    return (hw.org.burst_length // 2 + pipe + hw.timing.cl + xfer) * tck


def layout_estimate_ns(hw: Hardware, pl: GemvLayout) -> float:
    """A rough PIM time of the resolved plan ``pl``, for ranking layouts of one GEMV (not a
    bound): the rows one unit walks, once per group of batch rows, each costing its
    column MACs for the ``Br`` rows of the group plus the activation and precharge it
    does not hide (all of it in one bank, about half of the activation with interleaved
    bank pairs, nothing with the pipelined row walk); each pass's first activation; the
    broadcast of every tile when it is not double-buffered (less the activation waiting
    with it; once per batch group where the input stays resident); then the read-out of every
    accumulator the channel fills (all passes, batch rows and k-slices) over the channel
    bus.

    A deeper reduction split fills fewer rows with padding but reads out one partial per
    output and slice, so the two terms trade against each other.
    """
    t, tck, o = hw.timing, hw.org.tck_ns, pl.opts
    unit_rows = pl.rows_per_bank * (2 if o.interleave else 1)
    act = 0.0 if o.row_prefetch else t.trcd_mac * tck / 2 if o.interleave else \
        (t.trcd_mac + t.trp) * tck
    banks = pl.nbg * unit_rows * (pl.Br * hw.columns_per_row * hw.pim_column_ns + act)
    passes = pl.nbg * pl.P
    # a broadcast not double-buffered waits for the previous tile's MACs; an activation
    # not prefetched waits with it, hiding that much of it
    hidden = 0.0 if o.row_prefetch else t.trcd_mac * tck
    # a resident input (one tile, passes outside it) is broadcast once per batch group
    writes = pl.nbg if pl.resident_input else passes * pl.ntiles
    gb = 0.0 if o.double_buffer else writes * max(
        t.cwl * tck + pl.Br * pl.T * hw.elem_bytes / hw.channel_bus_gbps - hidden, 0.0)
    readout = pl.P * pl.U * pl.R * pl.RL * pl.batch * DTYPE_BYTES[hw.pim.accum_dtype]
    return banks + passes * t.trcd_mac * tck + gb + readout / hw.channel_bus_gbps
