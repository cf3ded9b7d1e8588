"""SQL storage through SQLAlchemy Core: a SQLite file by default (WAL mode), any URL else.

SQLAlchemy is used (it already comes with Optuna) so that the same code serves a local
file and a PostgreSQL server shared by several tuning machines.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.exc import SQLAlchemyError

from autosched.measure.record import Measurement
from search_spaces.schedule import Schedule
from search_spaces.workload import Workload

from .base import Database, DatabaseError

__all__ = ["SqlDatabase"]

SCHEMA_VERSION = 1
_meta = sa.MetaData()
measurements = sa.Table(
    "measurements", _meta,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("workload_key", sa.String(256), nullable=False),
    sa.Column("op", sa.String(32), nullable=False),
    sa.Column("shape", sa.Text, nullable=False),
    sa.Column("hw_fingerprint", sa.String(64), nullable=False),
    sa.Column("hw_name", sa.String(128), nullable=False),
    sa.Column("space", sa.String(64), nullable=False),
    sa.Column("space_version", sa.Integer, nullable=False),
    sa.Column("sim_version", sa.String(32), nullable=False),
    sa.Column("schedule_key", sa.String(512), nullable=False),
    sa.Column("latency_ns", sa.Float, nullable=True),
    sa.Column("energy_pj", sa.Float, nullable=True),
    sa.Column("error", sa.Text, nullable=False, default=""),
    sa.Column("record", sa.Text, nullable=False),
    sa.Column("created", sa.Float, nullable=False),
    sa.Index("ix_lookup", "workload_key", "hw_fingerprint", "space", "space_version"),
    sa.Index("ix_exact", "workload_key", "hw_fingerprint", "schedule_key", "sim_version"),
)
plans = sa.Table(
    "plans", _meta,
    sa.Column("key", sa.String(256), primary_key=True),
    sa.Column("hw_fingerprint", sa.String(64), primary_key=True),
    sa.Column("plan", sa.Text, nullable=False),
    sa.Column("latency_ns", sa.Float, nullable=False),
    sa.Column("created", sa.Float, nullable=False),
)
info = sa.Table("autosched_info", _meta, sa.Column("key", sa.String(64), primary_key=True),
                sa.Column("value", sa.String(256)))


def _url(db: str) -> str:
    return db if "://" in db else f"sqlite:///{Path(db).expanduser()}"


class SqlDatabase(Database):
    """Measurements in one SQL table; ``where`` is a file path or an SQLAlchemy URL."""

    def __init__(self, where: str | Path) -> None:
        self.where = str(where)
        url = _url(self.where)
        try:
            kw = {"connect_args": {"timeout": 60}} if url.startswith("sqlite") else {}
            self.engine = sa.create_engine(url, **kw)
            if url.startswith("sqlite"):
                event.listen(self.engine, "connect", _sqlite_pragmas)
            with self.engine.begin() as conn:
                _meta.create_all(conn, checkfirst=True)
                row = conn.execute(sa.select(info.c.value).where(info.c.key == "schema")).first()
                if row is None:
                    conn.execute(info.insert().values(key="schema", value=str(SCHEMA_VERSION)))
                elif row[0] != str(SCHEMA_VERSION):
                    raise DatabaseError(f"{self.where}: schema version {row[0]}, expected "
                                        f"{SCHEMA_VERSION}; export it with an older autosched")
        except SQLAlchemyError as e:
            raise DatabaseError(f"{self.where} is not a usable autosched database "
                                f"({_reason(e)}); move it away or pass another --db") from None

    def commit(self, m: Measurement) -> None:
        row = {
            "workload_key": m.workload.key, "op": m.workload.op,
            "shape": json.dumps(dict(m.workload.shape)), "hw_fingerprint": m.hw_fingerprint,
            "hw_name": m.hw_name, "space": m.schedule.space, "space_version": m.schedule.version,
            "sim_version": m.sim_version, "schedule_key": m.schedule.key,
            "latency_ns": m.to_dict()["latency_ns"], "energy_pj": m.to_dict()["energy_pj"],
            "error": m.error, "record": json.dumps(m.to_dict()), "created": m.created,
        }
        self._run(lambda c: c.execute(measurements.insert().values(**row)), write=True)

    def find(self, workload: Workload, hw_fingerprint: str, schedule: Schedule,
             sim_version: str) -> Measurement | None:
        t = measurements.c
        q = sa.select(measurements.c.record).where(
            t.workload_key == workload.key, t.hw_fingerprint == hw_fingerprint,
            t.schedule_key == schedule.key, t.sim_version == sim_version,
            t.space == schedule.space, t.space_version == schedule.version,
        ).order_by(t.id).limit(1)
        rows = self._run(lambda c: c.execute(q).all())
        return Measurement.from_dict(json.loads(rows[0][0])) if rows else None

    def records(self, *, workload: Workload | None = None, hw_fingerprint: str | None = None,
                op: str | None = None, space: str | None = None,
                space_version: int | None = None) -> list[Measurement]:
        t = measurements.c
        q = sa.select(t.record).order_by(t.id)
        for col, val in ((t.workload_key, workload.key if workload else None),
                         (t.hw_fingerprint, hw_fingerprint), (t.op, op), (t.space, space),
                         (t.space_version, space_version)):
            if val is not None:
                q = q.where(col == val)
        rows = self._run(lambda c: c.execute(q).all())
        return [Measurement.from_dict(json.loads(r[0])) for r in rows]

    def save_plan(self, key: str, hw_fingerprint: str, plan: dict, latency_ns: float) -> None:
        row = {"key": key, "hw_fingerprint": hw_fingerprint, "plan": json.dumps(plan),
               "latency_ns": latency_ns, "created": time.time()}

        def write(c) -> None:
            c.execute(plans.delete().where(plans.c.key == key,
                                           plans.c.hw_fingerprint == hw_fingerprint))
            c.execute(plans.insert().values(**row))

        self._run(write, write=True)

    def plan(self, key: str, hw_fingerprint: str) -> dict | None:
        q = sa.select(plans.c.plan).where(plans.c.key == key,
                                          plans.c.hw_fingerprint == hw_fingerprint)
        rows = self._run(lambda c: c.execute(q).all())
        return json.loads(rows[0][0]) if rows else None

    def __len__(self) -> int:
        q = sa.select(sa.func.count()).select_from(measurements)
        return int(self._run(lambda c: c.execute(q).scalar_one()))

    def close(self) -> None:
        self.engine.dispose()

    def _run(self, fn, write: bool = False):
        try:
            with self.engine.begin() as conn:
                return fn(conn)
        except SQLAlchemyError as e:
            raise DatabaseError(f"{self.where}: database error ({_reason(e)})") from None


def _sqlite_pragmas(dbapi_conn, _record) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA busy_timeout=60000")
    cur.close()


def _reason(e: Exception) -> str:
    orig = getattr(e, "orig", None)
    return str(orig) if orig is not None else type(e).__name__
