"""The largest batch of a compiled step's shape that fits its device.

Weights and constants do not depend on the batch. The KV cache of batch ``b`` is what
each attention's layout needs for ``b`` sequences at the step's capacity: its schedule if
that still lays out ``b`` sequences, else its family default at ``b``. Activations grow
with the rows of the step: the compiled arena, scaled by ``b / batch`` (every activation
buffer holds one slice per row; the constants do not scale).
"""

from __future__ import annotations

from search_spaces import Workload
from search_spaces.attention import attention_default, attention_space, cache_rows
from search_spaces.attention.geometry import attention_shape
from search_spaces.attention.space import capacity_of
from sim.errors import AutoschedError

__all__ = ["kv_rows", "max_batch"]

_TOP = 1 << 14  # the search stops here


def kv_rows(w: Workload, point: dict, batch: int, hw) -> int | None:
    """Rows per bank of ``w``'s KV cache at ``batch`` sequences (None: cannot be laid out)."""
    wb = Workload.make("attention", w.dtype, dict(w.attrs), **{**w.dims, "b": batch})
    try:
        if attention_space(wb, hw).validate(point):
            point = attention_default(wb, hw)
    except AutoschedError:
        return None
    return cache_rows(attention_shape(wb.dims, capacity_of(wb), hw), point)


def max_batch(cm) -> int:
    """The largest batch (at most 16384) whose step of ``cm``'s shape fits the device;
    0 when not even one sequence fits."""
    b0 = cm.graph.batch
    budget = cm.budget
    ri = budget.row_index
    attn = {}
    for n in cm.graph:
        if n.workload.op == "attention":
            c = cm.choices[n.name]
            key = (c.workload.key, c.schedule.key)
            attn.setdefault(key, [c.workload, c.schedule.point, 0])[2] += 1

    def fits(b: int) -> bool:
        rows = 0
        for w, point, count in attn.values():
            r = kv_rows(w, point, b, cm.hw)
            if r is None:
                return False
            rows += count * r
        host = budget.constants + budget.activations * b / b0
        return budget.weights + rows * ri + -(-host // ri) * ri <= budget.capacity

    if not fits(1):
        return 0
    lo, hi = 1, 2
    while hi <= _TOP and fits(hi):
        lo, hi = hi, hi * 2
    hi = min(hi, _TOP + 1)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo
