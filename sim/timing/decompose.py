"""Where a program's time goes beyond its column work: a decomposition by ablation.

The program is simulated on the hardware as given, then again with one cost after the
other made free (cumulatively): the all-bank refreshes, the row activations and
precharges, the channel bus (input broadcasts and accumulator read-outs), and the host
(dispatch and roofline of its ops: the hand-off between memory and host). Each part is the
time that removing it saved; ``rest`` is what is left (column commands, padding included,
and the dependencies between them). The parts add up to the latency. An ablation is an
answer to "what if this were free", not a bound: it says which schedule dimension or
which bound term to look at, for example activations a bank pair could hide.
"""

from __future__ import annotations

import dataclasses

from ..hardware import Hardware
from ..program import Program

__all__ = ["PARTS", "decompose"]

PARTS = ("refresh", "activations", "bus", "host", "rest")
_FAST = 1e6  # a bus or host this many times faster is free for every program here


def _stages(hw: Hardware) -> list[Hardware]:
    """The hardware with each cost removed in turn, cumulatively (order of ``PARTS``)."""
    t = hw.timing
    no_ref = dataclasses.replace(hw, timing=dataclasses.replace(t, trefi=1 << 40))
    t = no_ref.timing
    free_rows = dataclasses.replace(no_ref, timing=dataclasses.replace(
        t, trcd=1, trcd_wr=1, trcd_mac=1, trp=1, tras=1, trrd_s=1, trrd_l=1, tfaw=1))
    free_bus = dataclasses.replace(free_rows, bus=dataclasses.replace(
        free_rows.bus, data_rate_gbps=free_rows.bus.data_rate_gbps * _FAST),
        timing=dataclasses.replace(free_rows.timing, cl=1, cwl=1))
    h = free_bus.host
    free_host = dataclasses.replace(free_bus, host=dataclasses.replace(
        h, op_overhead_ns=0.0, peak_gflops=h.peak_gflops * _FAST,
        bandwidth_gbps=h.bandwidth_gbps * _FAST))
    return [hw, no_ref, free_rows, free_bus, free_host]


def decompose(program: Program, hw: Hardware) -> dict[str, float]:
    """``{part: ns}`` for ``PARTS`` plus ``latency``: the parts add up to the latency."""
    from .engine import simulate

    lat = [simulate(program, h).latency_ns for h in _stages(hw)]
    out = {p: max(lat[i] - lat[i + 1], 0.0) for i, p in enumerate(PARTS[:-1])}
    out["rest"] = max(round(lat[0] - sum(out.values()), 6), 0.0)
    out["latency"] = lat[0]
    return out
