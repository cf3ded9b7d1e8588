"""Nearest workload by shape: the distance, and a search that an index can answer.

The distance between two workloads of one family (same op, dtype and attributes) is the
sum over dims of ``|log(a / b)|``: an L1 distance between log-shapes. Every stored
workload keeps its log-dims (``x0..x5``) and their sum (``size``). Since
``|size(a) - size(b)| <= distance(a, b)`` and each ``|x_i(a) - x_i(b)| <= distance(a, b)``,
all workloads within distance ``r`` lie in the box ``|size - size(q)| <= r``,
``|x_i - x_i(q)| <= r``, which a B-tree index on ``size`` narrows to a slab. The search
asks for growing radii and yields, at each, the rows proven nearer than anything outside.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

from search_spaces.workload import FAMILIES, Workload

__all__ = ["MAX_DIMS", "RADII", "by_distance", "family_of", "log_dims", "shape_distance"]

MAX_DIMS = max(len(d) for d in FAMILIES.values())
RADII = (0.1, 0.4, 1.6, 6.4, math.inf)  # search radii in summed |log ratio|
T = TypeVar("T")


def family_of(w: Workload) -> str:
    """What two workloads must share to be compared: op, dtype and attributes."""
    return f"{w.op}:{w.dtype}:{json.dumps(dict(w.attrs), sort_keys=True)}"


def shape_distance(a: Workload, b: Workload) -> float:
    """Sum over dims of |log(a/b)|; infinite across families, dtypes or attributes."""
    if family_of(a) != family_of(b):
        return math.inf
    da, db = a.dims, b.dims
    return sum(abs(math.log(da[k] / db[k])) for k in da)


def log_dims(w: Workload) -> list[float]:
    """``log`` of each dim in the family's order, padded with zeros to :data:`MAX_DIMS`."""
    xs = [math.log(v) for _, v in w.shape]
    return xs + [0.0] * (MAX_DIMS - len(xs))


def by_distance(query: Workload, fetch: Callable[[float], Iterable[tuple[Workload, T]]]
                ) -> Iterator[tuple[Workload, T]]:
    """``(workload, payload)`` pairs nearest first (ties by workload key), each once.

    ``fetch(r)`` returns at least every candidate within distance ``r`` of ``query`` (it
    may return more); ``fetch(inf)`` returns all of them.
    """
    seen: set[str] = set()
    for r in RADII:
        found = [(shape_distance(query, w), w.key, w, p) for w, p in fetch(r)]
        for d, k, w, p in sorted(found, key=lambda t: (t[0], t[1])):
            if d <= r and k not in seen:
                seen.add(k)
                yield w, p
