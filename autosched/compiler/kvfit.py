"""Fitting the KV cache: when a step's memory plan overflows, compact the cache layouts.

Attention layouts differ in how densely they fill the banks (a layout for in-bank scores
may use one bank of each unit's pair; the host-read layout packs every bank). When the
budget does not fit, :func:`compact_schedule` gives each attention workload the fastest
schedule whose cache fits the rows left after the weights and host buffers: among the
valid points within that many rows, a handful of distinct placements (scores and
weighted sum, channels used) closest to the default are simulated alone and the fastest
is kept.
"""

from __future__ import annotations

from autosched.codegen.registry import build, lowering_for, space_of
from search_spaces import Schedule, Workload
from search_spaces.attention import cache_rows, channels_used
from search_spaces.attention.geometry import attention_shape
from search_spaces.attention.space import capacity_of
from sim.hardware import Hardware
from sim.timing import simulate

__all__ = ["compact_schedule"]

_TRIES = 6


def compact_schedule(w: Workload, hw: Hardware, max_rows: int) -> Schedule | None:
    """The fastest schedule of attention ``w`` whose cache needs at most ``max_rows`` rows
    per bank (None: no layout is that compact)."""
    low = lowering_for(w)
    space = space_of(w, hw)
    shape = attention_shape(w.dims, capacity_of(w), hw)
    default = low.default(w, hw)
    best: dict[tuple, tuple[int, dict]] = {}
    for p in space.enumerate():
        if cache_rows(shape, p) > max_rows:
            continue
        group = (p["scores"], p["wsum"], channels_used(p))
        same = sum(p.get(k) == v for k, v in default.items())
        if group not in best or same > best[group][0]:
            best[group] = (same, p)
    if not best:
        return None
    ranked = sorted(best.values(), key=lambda sp: (-channels_used(sp[1]), -sp[0]))[:_TRIES]
    timed = []
    for i, (_, p) in enumerate(ranked):
        s = Schedule.of(space, p)
        timed.append((simulate(build(w, s, hw).program, hw).latency_ns, i, s))
    return min(timed)[2]
