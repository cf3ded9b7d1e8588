"""Writing one measurement: the idempotent insert, and the workloads summary beside it.

Both run in the caller's transaction, so a measurement and its summary change commit
together. On SQLite and PostgreSQL the insert is ``INSERT ... ON CONFLICT DO NOTHING``
(concurrent writers of one record wait for each other and one wins); other databases
check first and rely on the unique index.
"""

from __future__ import annotations

import json

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from autosched.measure.record import Measurement

from .schema import key_values, measurements, summary_row, workloads

__all__ = ["RECORD_UNIQUE", "insert_ignore", "measurement_row", "note", "store"]

_INSERTS = {"sqlite": sqlite.insert, "postgresql": postgresql.insert}
RECORD_UNIQUE = ("workload_key", "hw_fingerprint", "space", "space_version", "sim_version",
                 "schedule_key")


def insert_ignore(conn: sa.Connection, table: sa.Table, row: dict,
                  unique: tuple[str, ...]) -> int | None:
    """Insert ``row`` unless a row with the same ``unique`` columns exists; returns the
    new row's ``id`` (None when it existed)."""
    make = _INSERTS.get(conn.dialect.name)
    if make is not None:
        ins = make(table).values(**row).on_conflict_do_nothing(index_elements=list(unique))
        return conn.execute(ins.returning(table.c.id)).scalar_one_or_none()
    where = [table.c[c] == row[c] for c in unique]
    if conn.execute(sa.select(table.c.id).where(*where)).first() is not None:
        return None
    return conn.execute(table.insert().values(**row)).inserted_primary_key[0]


def note(conn: sa.Connection, m: Measurement, mid: int) -> None:
    """Count ``m`` (stored with id ``mid``) in its workloads row; make it the best if it
    is faster than the best so far (the earlier one stays best on a tie)."""
    key = m.key
    values = key_values(key)
    insert_ignore(conn, workloads, summary_row(key), tuple(values))
    w = workloads.c
    where = [w[c] == v for c, v in values.items()]
    conn.execute(workloads.update().where(*where).values(records=w.records + 1))
    if m.ok:
        conn.execute(workloads.update().where(
            *where, sa.or_(w.best_ns.is_(None), w.best_ns > m.latency_ns))
            .values(best_ns=m.latency_ns, best_id=mid))


def measurement_row(m: Measurement, job: int | None, run: str | None) -> dict:
    """The ``measurements`` row of ``m``."""
    d = m.to_dict()
    return {**key_values(m.key), "op": m.workload.op, "shape": json.dumps(m.workload.dims),
            "hw_name": m.hw_name, "schedule_key": m.schedule.key,
            "latency_ns": d["latency_ns"], "energy_pj": d["energy_pj"], "error": m.error,
            "record": json.dumps(d), "created": m.created, "job": job, "run": run}



def store(conn: sa.Connection, m: Measurement, job: int | None = None,
          run: str | None = None) -> bool:
    """Insert ``m`` and count it in the summary; False (nothing written) if stored."""
    mid = insert_ignore(conn, measurements, measurement_row(m, job, run), RECORD_UNIQUE)
    if mid is None:
        return False
    note(conn, m, mid)
    return True
