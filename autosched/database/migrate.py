"""Forward migrations, run by :func:`~autosched.database.schema.ensure_schema` under its lock.

Each step takes a database from one schema version to the next inside the caller's
transaction, so a failed upgrade leaves the old schema as it was.
"""

from __future__ import annotations

import json

import sqlalchemy as sa

from autosched.measure.record import Measurement

from .schema import index, jobs, leases, measurements, summary_row, workloads
from .summary import note

__all__ = ["upgrade"]


def upgrade(conn: sa.Connection, version: int) -> None:
    """Apply every step from ``version`` to the current schema."""
    if version == 1:
        _v1_to_v2(conn)


def _v1_to_v2(conn: sa.Connection) -> None:
    """Job and run columns, unique measurements, the workloads summary, jobs and leases."""
    m = measurements.c
    conn.execute(sa.text("ALTER TABLE measurements ADD COLUMN job INTEGER"))
    conn.execute(sa.text("ALTER TABLE measurements ADD COLUMN run VARCHAR(96)"))
    key = (m.workload_key, m.hw_fingerprint, m.space, m.space_version, m.sim_version,
           m.schedule_key)
    first = sa.select(sa.func.min(m.id)).group_by(*key)
    conn.execute(measurements.delete().where(m.id.not_in(first)))
    conn.execute(sa.text("DROP INDEX IF EXISTS ix_exact"))
    for name in ("ux_measurement", "ix_job"):
        index(measurements, name).create(conn, checkfirst=True)
    for table in (workloads, jobs, leases):
        table.create(conn, checkfirst=True)
    rows = conn.execute(sa.select(m.id, m.record).order_by(m.id))
    seen: set = set()
    for mid, text in rows.all():
        rec = Measurement.from_dict(json.loads(text))
        if rec.key not in seen:
            seen.add(rec.key)
            conn.execute(workloads.insert().values(**summary_row(rec.key)))
        note(conn, rec, mid)
