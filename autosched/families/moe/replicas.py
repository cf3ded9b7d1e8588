"""Hot experts replicated over the devices that split a layer's experts.

With ``ep`` devices each keeping ``e / ep`` experts, the rows routed to a hot expert
queue on the one device that owns it. A schedule's ``replicas`` copies the ``r`` most
probable experts (:func:`hot`) onto every device: each device's program then has
``e / ep + r`` expert slots, its own experts (the replicated ones' rows cleared) and one
slot per replica holding the rows of that expert that fall to it (:func:`device_slots`,
the ``i``-th row in row order to device ``i % ep``), so the devices share the hot
expert's rows and their outputs still sum to the mixture. :func:`slot_rows` counts what
each slot receives on the expected path, which the timing simulator times.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["device_slots", "hot", "slot_rows"]

Arr = np.ndarray


def hot(probs: Arr, r: int) -> tuple[int, ...]:
    """The ``r`` most probable experts (ties: the lower index), in that order."""
    return tuple(int(j) for j in np.argsort(-np.asarray(probs), kind="stable")[:r])


def device_slots(weights: Arr, hot_experts: Sequence[int], ep: int) -> Arr:
    """``[ep, e / ep + r, m]``: each device's expert slots with hot experts replicated.

    Device ``d`` keeps its block of experts (``weights``: ``[e, m]``, expert-major), the
    replicated ones' rows cleared, then one slot per hot expert holding the rows of it
    that fall to ``d``: the ``i``-th row routed to it (in row order) goes to device
    ``i % ep``. Summed over devices the slots hold every expert's rows once."""
    e, m = weights.shape
    local = e // ep
    out = np.zeros((ep, local + len(hot_experts), m), weights.dtype)
    own = weights.copy()
    own[list(hot_experts)] = 0
    out[:, :local] = own.reshape(ep, local, m)
    for r, j in enumerate(hot_experts):
        for i, row in enumerate(np.nonzero(weights[j])[0]):
            out[i % ep, local + r, row] = weights[j, row]
    return out


def slot_rows(rows: Arr, hot_experts: Sequence[int], ep: int) -> Arr:
    """``[ep, e / ep + r]``: the rows each device's slots receive when expert ``j``
    receives ``rows[j]`` (what :func:`device_slots` gives rows of that many)."""
    rows = np.asarray(rows, int)
    taken = (np.arange(max(int(rows.max(initial=0)), 1)) < rows[:, None]).astype(np.int8)
    return (device_slots(taken, hot_experts, ep) != 0).sum(axis=2)
