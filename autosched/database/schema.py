"""The tables, and their creation and migration, safe when several processes open at once.

Schema 2 (this one) adds to schema 1: a unique key on measurements (record key and
schedule), the ``job`` and ``run`` that measured each, the ``workloads`` summary (one row
per record key: best measurement, count, log-shape for the nearest-workload index), and
the ``jobs`` and ``leases`` of cooperating tuning processes. A schema-1 database is
upgraded in place, in one transaction: exact duplicate measurements (same key and
schedule, which schema 1 let concurrent runs write) keep their first copy.

Creation and migration run under a lock (SQLite: the write lock of ``BEGIN IMMEDIATE``;
PostgreSQL: a transaction-level advisory lock), so processes starting together see one
schema. A database holding other applications' tables (anything but ours and Optuna's)
is refused untouched; a newer schema is refused with one line.
"""

from __future__ import annotations

import json

import sqlalchemy as sa

from autosched.measure.record import RecordKey

from .base import DatabaseError
from .engine import reason, transaction
from .nearest import MAX_DIMS, family_of, log_dims

__all__ = ["SCHEMA_VERSION", "check_schema", "ensure_schema", "foreign_tables", "index", "jobs",
           "key_values", "leases", "measurements", "plans", "summary_row", "workloads"]

SCHEMA_VERSION = 2
_LOCK_ID = 0x6175746F  # PostgreSQL advisory lock of schema changes ("auto")
_meta = sa.MetaData()
_KEY = ("workload_key", "hw_fingerprint", "space", "space_version", "sim_version")

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
    sa.Column("job", sa.Integer, nullable=True),
    sa.Column("run", sa.String(96), nullable=True),
    sa.Index("ix_lookup", "workload_key", "hw_fingerprint", "space", "space_version"),
    sa.Index("ux_measurement", *_KEY, "schedule_key", unique=True),
    sa.Index("ix_job", "job", "run"),
)

workloads = sa.Table(
    "workloads", _meta,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    *(sa.Column(c, measurements.c[c].type, nullable=False) for c in _KEY),
    sa.Column("family", sa.String(320), nullable=False),
    sa.Column("shape", sa.Text, nullable=False),
    sa.Column("size", sa.Float, nullable=False),
    *(sa.Column(f"x{i}", sa.Float, nullable=False) for i in range(MAX_DIMS)),
    sa.Column("records", sa.Integer, nullable=False, default=0),
    sa.Column("best_ns", sa.Float, nullable=True),
    sa.Column("best_id", sa.Integer, nullable=True),
    sa.Index("ux_workload", *_KEY, unique=True),
    sa.Index("ix_near", "family", "hw_fingerprint", "space", "space_version", "sim_version",
             "size"),
)
plans = sa.Table(
    "plans", _meta,
    sa.Column("key", sa.String(256), primary_key=True),
    sa.Column("hw_fingerprint", sa.String(64), primary_key=True),
    sa.Column("plan", sa.Text, nullable=False),
    sa.Column("latency_ns", sa.Float, nullable=False),
    sa.Column("created", sa.Float, nullable=False),
)
jobs = sa.Table(
    "jobs", _meta,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("key", sa.String(64), nullable=False),
    sa.Column("budget", sa.Integer, nullable=False),
    sa.Column("done", sa.Boolean, nullable=False, default=False),
    sa.Column("created", sa.Float, nullable=False),
    sa.Index("ix_job_key", "key", "done"),
)
leases = sa.Table(
    "leases", _meta,
    sa.Column("task", sa.String(512), primary_key=True),
    sa.Column("owner", sa.String(96), nullable=False),
    sa.Column("job", sa.Integer, nullable=False),
    sa.Column("heartbeat", sa.Float, nullable=False),
    sa.Column("reserved", sa.Integer, nullable=False, default=0),
    sa.Index("ix_lease_job", "job"),
)
info = sa.Table("autosched_info", _meta, sa.Column("key", sa.String(64), primary_key=True),
                sa.Column("value", sa.String(256)))

OPTUNA = frozenset({"studies", "study_directions", "study_user_attributes",
                    "study_system_attributes", "trials", "trial_user_attributes",
                    "trial_system_attributes", "trial_params", "trial_values",
                    "trial_intermediate_values", "trial_heartbeats", "version_info",
                    "alembic_version"})


def index(table: sa.Table, name: str) -> sa.Index:
    return next(i for i in table.indexes if i.name == name)


def key_values(key: RecordKey) -> dict:
    """The five key columns of a record key."""
    return {"workload_key": key.workload.key, "hw_fingerprint": key.hw_fingerprint,
            "space": key.space, "space_version": key.space_version,
            "sim_version": key.sim_version}


def summary_row(key: RecordKey) -> dict:
    """The ``workloads`` row of a record key, before any measurement is counted."""
    xs = log_dims(key.workload)
    return {**key_values(key), "family": family_of(key.workload),
            "shape": json.dumps(key.workload.dims), "size": sum(xs),
            **{f"x{i}": x for i, x in enumerate(xs)}, "records": 0}


def foreign_tables(tables: set[str]) -> set[str]:
    """Tables of a database without our info table that are not Optuna's: such tables
    belong to another application (ours are never created without the info table)."""
    return set(tables) - OPTUNA


def ensure_schema(engine: sa.Engine, display: str) -> None:
    """Create, upgrade or accept the schema of ``engine``'s database; see the module doc."""
    try:
        if _version(engine, display) == SCHEMA_VERSION:
            return  # the common case: no write lock taken
        with transaction(engine, write=True) as conn:
            if conn.dialect.name == "postgresql":
                conn.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": _LOCK_ID})
            version = _read_version(conn, display)  # again, under the lock
            if version is None:
                _meta.create_all(conn)
                conn.execute(info.insert().values(key="schema", value=str(SCHEMA_VERSION)))
            elif version < SCHEMA_VERSION:
                from .migrate import upgrade

                upgrade(conn, version)
                conn.execute(info.update().where(info.c.key == "schema")
                             .values(value=str(SCHEMA_VERSION)))
    except sa.exc.SQLAlchemyError as e:
        raise _unusable(engine, display, e) from None


def _unusable(engine: sa.Engine, display: str, e: sa.exc.SQLAlchemyError) -> DatabaseError:
    """The one-line error of a database that cannot be opened: a server that does not
    answer, or a file that is not an SQLite database."""
    if isinstance(e, sa.exc.OperationalError) and engine.dialect.name != "sqlite":
        return DatabaseError(f"{display}: cannot use the database server ({reason(e)})")
    return DatabaseError(f"{display} is not a usable autosched database ({reason(e)}); "
                         "pass another --db")


def check_schema(engine: sa.Engine, display: str) -> None:
    """Accept ``engine``'s database as it is, never writing: it must hold this schema."""
    try:
        version = _version(engine, display)
    except sa.exc.SQLAlchemyError as e:
        raise _unusable(engine, display, e) from None
    if version is None:
        raise DatabaseError(f"{display} holds no autosched database: run `autosched tune` "
                            "first or pass --db")
    if version < SCHEMA_VERSION:
        raise DatabaseError(f"{display} has schema version {version}, this autosched reads "
                            f"{SCHEMA_VERSION}: a tune on it upgrades it in place "
                            "(commands that only read never write)")


def _version(engine: sa.Engine, display: str) -> int | None:
    with transaction(engine, write=False) as conn:
        return _read_version(conn, display)


def _read_version(conn: sa.Connection, display: str) -> int | None:
    """The stored schema version; None for an empty database; raises for a foreign or
    newer one."""
    tables = set(sa.inspect(conn).get_table_names())
    if "autosched_info" not in tables:
        other = foreign_tables(tables)
        if other:
            raise DatabaseError(f"{display} belongs to another application (tables: "
                                f"{', '.join(sorted(other)[:5])}); autosched left it "
                                "untouched: pass another --db")
        return None
    row = conn.execute(sa.select(info.c.value).where(info.c.key == "schema")).first()
    try:
        version = int(row[0]) if row else 0
    except ValueError:
        version = -1
    if version < 1:
        raise DatabaseError(f"{display}: unreadable schema version {row and row[0]!r}")
    if version > SCHEMA_VERSION:
        raise DatabaseError(f"{display} has schema version {version}, newer than this "
                            f"autosched reads ({SCHEMA_VERSION}): upgrade autosched")
    return version
