"""The hot read queries, built once with bound parameters (SQLAlchemy compiles each once).

Lookups run one of these per workload of a model: building the statement anew each time
costs more than the database answering it.
"""

from __future__ import annotations

import sqlalchemy as sa

from autosched.measure.record import RecordKey

from .nearest import MAX_DIMS, family_of, log_dims
from .schema import key_values, measurements, workloads

__all__ = ["BEST", "COUNT", "STALE", "near_params", "near_query"]

_w, _m = workloads.c, measurements.c
_KEY = ("workload_key", "hw_fingerprint", "space", "space_version", "sim_version")
_BY_KEY = [_w[c] == sa.bindparam(c) for c in _KEY]
_BEST_ROW = workloads.join(measurements, _m.id == _w.best_id)

BEST = sa.select(_m.record).select_from(_BEST_ROW).where(*_BY_KEY)
COUNT = sa.select(_w.records).where(*_BY_KEY)
STALE = (sa.select(_w.space_version, _w.sim_version, _w.records)
         .where(*_BY_KEY[:3], sa.or_(_w.space_version != sa.bindparam("space_version"),
                                     _w.sim_version != sa.bindparam("sim_version")))
         .order_by(_w.space_version, _w.sim_version))
_NEAR = (sa.select(_w.shape, _m.record).select_from(_BEST_ROW)
         .where(_w.family == sa.bindparam("family"), *_BY_KEY[1:],
                _w.workload_key != sa.bindparam("workload_key")))
_BOXES = [_NEAR.where(_w.size.between(sa.bindparam("lo"), sa.bindparam("hi")), *(
    _w[f"x{i}"].between(sa.bindparam(f"lo{i}"), sa.bindparam(f"hi{i}")) for i in range(d)))
    for d in range(MAX_DIMS + 1)]


def near_query(key: RecordKey, r: float) -> sa.Select:
    """All workloads of ``key``'s family (``r`` infinite), or those in the box of radius
    ``r`` around its log-shape (a superset of those within distance ``r``)."""
    return _NEAR if r == float("inf") else _BOXES[len(key.workload.shape)]


def near_params(key: RecordKey, r: float, eps: float = 1e-9) -> dict:
    params = {**key_values(key), "family": family_of(key.workload)}
    if r != float("inf"):
        xs = log_dims(key.workload)
        s = sum(xs)
        params.update(lo=s - r - eps, hi=s + r + eps)
        for i in range(len(key.workload.shape)):
            params.update({f"lo{i}": xs[i] - r - eps, f"hi{i}": xs[i] + r + eps})
    return params
