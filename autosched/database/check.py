"""The database's integrity check: the file itself, unique records, a summary that agrees.

``autosched db check`` runs it after a crash or a full disk; the fault suite runs it
after every injected fault. It reads only.
"""

from __future__ import annotations

import sqlalchemy as sa

from .schema import measurements, workloads
from .sql import SqlDatabase

__all__ = ["check_database"]

_KEY = ("workload_key", "hw_fingerprint", "space", "space_version", "sim_version")


def check_database(db: SqlDatabase) -> list[str]:
    """Every problem found, one line each; an empty list means the database is sound."""
    return db.execute(_problems)


def _problems(c: sa.Connection) -> list[str]:
    out: list[str] = []
    if c.dialect.name == "sqlite":
        rows = [r[0] for r in c.exec_driver_sql("PRAGMA integrity_check").all()]
        if rows != ["ok"]:
            out += [f"sqlite integrity: {r}" for r in rows[:10]]
    m, w = measurements.c, workloads.c
    key = [m[k] for k in _KEY]
    dups = c.execute(sa.select(*key, m.schedule_key, sa.func.count())
                     .group_by(*key, m.schedule_key).having(sa.func.count() > 1)).all()
    out += [f"measured twice: {r.workload_key} {r.schedule_key} ({r[-1]} records)"
            for r in dups[:10]]
    ok = sa.and_(m.error == "", m.latency_ns.is_not(None))
    counts = (sa.select(*key, sa.func.count().label("n"),
                        sa.func.min(sa.case((ok, m.latency_ns))).label("best"))
              .group_by(*key).subquery())
    joined = (sa.select(w.workload_key, w.records, w.best_ns, counts.c.n, counts.c.best)
              .select_from(workloads.outerjoin(
                  counts, sa.and_(*(w[k] == counts.c[k] for k in _KEY)))))
    for r in c.execute(joined).all():
        if r.records != (r.n or 0) or r.best_ns != r.best:
            out.append(f"summary of {r.workload_key} disagrees: {r.records} records best "
                       f"{r.best_ns}, stored {r.n or 0} best {r.best}")
    unsummarised = c.execute(sa.select(sa.func.count()).select_from(counts).where(
        ~sa.exists().where(*(w[k] == counts.c[k] for k in _KEY)))).scalar_one()
    if unsummarised:
        out.append(f"{unsummarised} record key(s) missing from the workloads summary")
    stray = c.execute(sa.select(sa.func.count()).select_from(workloads).where(
        w.best_id.is_not(None), ~sa.exists().where(m.id == w.best_id))).scalar_one()
    if stray:
        out.append(f"{stray} best record(s) missing from the measurements")
    return out
