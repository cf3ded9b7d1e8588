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

from typing import Any

from search_spaces import Schedule, Workload
from search_spaces.attention import cache_rows, channels_used
from search_spaces.attention.geometry import attention_shape
from search_spaces.attention.space import capacity_of
from sim.hardware import Hardware
from sim.timing import simulate

__all__ = ["compact_schedule", "compact_schedules"]

_TRIES = 6


def compact_schedule(w: Workload, hw: Hardware, max_rows: int) -> Schedule | None:
    """The fastest schedule of attention ``w`` whose cache needs at most ``max_rows`` rows
    per bank (None: no layout is that compact)."""
    from ..registry import build, family_of, space_of

    low = family_of(w)
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


def compact_schedules(cm: Any) -> dict[str, Schedule]:
    """Schedules giving every attention of ``cm`` (a compiled step or stage) whose schedule
    was looked up the fastest layout whose cache fits the rows the weights and host
    buffers leave (shared evenly); empty when none is compact enough."""
    from ..registry import family_of

    bd, hw = cm.budget, cm.hw
    mine = [n for n in cm.graph if n.name in cm.choices and family_of(n.workload).memory_kind
            == "cache" and not cm.choices[n.name].kind.fixed]  # this stage's own
    if not mine:
        return {}
    left = hw.org.rows_per_bank - (bd.weights + bd.host) // bd.row_index
    per = left // len(mine)
    out: dict[str, Schedule] = {}
    found: dict[str, Schedule | None] = {}
    for n in mine:
        w = cm.choices[n.name].workload
        if w.key not in found:
            found[w.key] = compact_schedule(w, hw, per)
        if found[w.key] is None:
            return {}
        out[n.name] = found[w.key]
    return out
