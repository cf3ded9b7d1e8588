"""The largest batch of a compiled step's shape that fits its device.

Weights and constants do not depend on the batch. The cache of batch ``b`` is what each
cache-holding family says its layout needs for ``b`` sequences at the step's capacity
(``Family.cache_rows``: its schedule if that still lays out ``b`` sequences, else its
default at ``b``). Activations grow
with the rows of the step: the compiled arena, scaled by ``b / batch`` (every activation
buffer holds one slice per row; the constants do not scale).
"""

from __future__ import annotations

from autosched.families import family_of

__all__ = ["max_batch"]

_TOP = 1 << 14  # the search stops here


def max_batch(cm) -> int:
    """The largest batch (at most 16384) whose step of ``cm``'s shape (a compiled stage)
    fits the device; 0 when not even one sequence fits."""
    b0 = cm.graph.batch
    budget = cm.budget
    ri = budget.row_index
    held = {}
    for n in cm.graph:
        if n.name not in cm.choices:
            continue
        c = cm.choices[n.name]
        if family_of(c.workload).cache_bytes(c.workload, cm.hw):
            key = (c.workload.key, c.schedule.key)
            held.setdefault(key, [c.workload, c.schedule.point, 0])[2] += 1

    def fits(b: int) -> bool:
        rows = 0
        for w, point, count in held.values():
            r = family_of(w).cache_rows(w, point, b, cm.hw)
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
