"""SQL storage through SQLAlchemy Core: a SQLite file by default (WAL mode), any URL else.

SQLAlchemy is used (it already comes with Optuna) so that the same code serves a local
file and a PostgreSQL server shared by several tuning machines. Tables, creation and
migration: :mod:`.schema`; the idempotent write: :mod:`.summary`; locations, drivers
and transactions: :mod:`.engine`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import sqlalchemy as sa

from autosched.measure.record import Measurement, RecordKey
from search_spaces.schedule import Schedule
from search_spaces.workload import Workload
from sim.files import parse_json, shown

from .base import Database, DatabaseError, Stale
from .engine import is_sqlite, make_engine, normalise, reason, sqlite_path, sqlite_tables
from .engine import transaction as _transaction
from .nearest import by_distance
from .queries import BEST, COUNT, STALE, near_params, near_query
from .schema import check_schema, ensure_schema, foreign_tables, key_values, measurements, plans
from .summary import store
from .where import check_location

__all__ = ["SqlDatabase"]

T = TypeVar("T")


class SqlDatabase(Database):
    """Measurements in SQL tables; ``where`` is a file path or an SQLAlchemy URL
    (``readonly``: an existing database of this schema, read and never written).

    ``url`` is the full URL (Optuna's storage of the same database), ``where`` the text
    to show (passwords hidden).
    """

    def __init__(self, where: str | Path, *, readonly: bool = False) -> None:
        self.url, self.where = normalise(where)
        self.readonly = readonly
        check_location(where, must_exist=readonly)  # folders, devices, in-memory: refused
        if is_sqlite(self.url) and (path := sqlite_path(self.url)) is not None:
            tables = sqlite_tables(path, self.where)  # read-only: a foreign file stays as it is
            if tables is not None and "autosched_info" not in tables \
                    and foreign_tables(tables):
                raise DatabaseError(f"{self.where} belongs to another application (tables: "
                                    f"{', '.join(sorted(foreign_tables(tables))[:5])}); "
                                    "autosched left it untouched: pass another --db")
        self.engine = make_engine(self.url, self.where, readonly=readonly)
        try:
            (check_schema if readonly else ensure_schema)(self.engine, self.where)
        except Exception:
            self.engine.dispose()
            raise

    # ------------------------------------------------------------------ writes
    def commit(self, m: Measurement, *, job: int | None = None, run: str | None = None
               ) -> bool:
        """Store ``m`` (tagged with the ``job`` and ``run`` that measured it, if any)."""
        return self.execute(lambda c: store(c, m, job, run), write=True)

    def commit_many(self, ms, *, job: int | None = None, run: str | None = None) -> int:
        """Store many measurements in one transaction; returns how many were new."""
        return self.execute(lambda c: sum(store(c, m, job, run) for m in ms), write=True)

    def save_plan(self, key: str, hw_fingerprint: str, plan: dict, latency_ns: float) -> None:
        row = {"key": key, "hw_fingerprint": hw_fingerprint, "plan": json.dumps(plan),
               "latency_ns": latency_ns, "created": time.time()}

        def write(c: sa.Connection) -> None:
            c.execute(plans.delete().where(plans.c.key == key,
                                           plans.c.hw_fingerprint == hw_fingerprint))
            c.execute(plans.insert().values(**row))

        self.execute(write, write=True)

    # ------------------------------------------------------------------ reads
    def find(self, workload: Workload, hw_fingerprint: str, schedule: Schedule,
             sim_version: str) -> Measurement | None:
        t = measurements.c
        q = sa.select(t.record).where(
            t.workload_key == workload.key, t.hw_fingerprint == hw_fingerprint,
            t.schedule_key == schedule.key, t.sim_version == sim_version,
            t.space == schedule.space, t.space_version == schedule.version).limit(1)
        rows = self.execute(lambda c: c.execute(q).all())
        return _parse(rows[0][0]) if rows else None

    def records(self, key: RecordKey | None = None, *, workload: Workload | None = None,
                hw_fingerprint: str | None = None, op: str | None = None,
                space: str | None = None, space_version: int | None = None,
                sim_version: str | None = None) -> list[Measurement]:
        t = measurements.c
        q = sa.select(t.record).order_by(t.id)
        filters = {"workload_key": workload.key if workload else None,
                   "hw_fingerprint": hw_fingerprint, "op": op, "space": space,
                   "space_version": space_version, "sim_version": sim_version}
        if key is not None:
            filters.update(key_values(key))
        for col, val in filters.items():
            if val is not None:
                q = q.where(t[col] == val)
        rows = self.execute(lambda c: c.execute(q).all())
        return [_parse(r[0]) for r in rows]

    def best(self, key: RecordKey) -> Measurement | None:
        text = self.execute(lambda c: c.execute(BEST, key_values(key)).scalar_one_or_none())
        return _parse(text) if text is not None else None

    def nearest(self, key: RecordKey) -> Iterator[Measurement]:
        def fetch(r: float) -> list[tuple[Workload, str]]:
            q, params = near_query(key, r), near_params(key, r)
            rows = self.execute(lambda c: c.execute(q, params).all())
            return [(_workload(key.workload, shape), text) for shape, text in rows]

        for _, text in by_distance(key.workload, fetch):
            yield _parse(text)

    def count(self, key: RecordKey) -> int:
        n = self.execute(lambda c: c.execute(COUNT, key_values(key)).scalar_one_or_none())
        return int(n or 0)

    def stale(self, key: RecordKey) -> list[Stale]:
        rows = self.execute(lambda c: c.execute(STALE, key_values(key)).all())
        return [(int(a), str(b), int(n)) for a, b, n in rows]

    def plan(self, key: str, hw_fingerprint: str) -> dict | None:
        q = sa.select(plans.c.plan).where(plans.c.key == key,
                                          plans.c.hw_fingerprint == hw_fingerprint)
        rows = self.execute(lambda c: c.execute(q).all())
        return json.loads(rows[0][0]) if rows else None

    def plan_keys(self, hw_fingerprint: str) -> list[str]:
        q = sa.select(plans.c.key).where(plans.c.hw_fingerprint == hw_fingerprint) \
            .order_by(plans.c.key)
        return [r[0] for r in self.execute(lambda c: c.execute(q).all())]

    def __len__(self) -> int:
        q = sa.select(sa.func.count()).select_from(measurements)
        return int(self.execute(lambda c: c.execute(q).scalar_one()))

    # ------------------------------------------------------------------ plumbing
    def close(self) -> None:
        self.engine.dispose()

    def execute(self, fn: Callable[[sa.Connection], T], *, write: bool = False) -> T:
        """``fn(connection)`` in one transaction (a write one holds the write lock);
        SQLAlchemy errors become one-line :class:`DatabaseError`\\ s."""
        if write and self.readonly:
            raise DatabaseError(f"{self.where} was opened read-only; nothing was written")
        try:
            with _transaction(self.engine, write=write) as conn:
                return fn(conn)
        except sa.exc.SQLAlchemyError as e:
            hint = ("; the write was rolled back and everything committed before is kept (full "
                    "disk? free space and rerun to resume)") if write else ""
            raise DatabaseError(f"{self.where}: database error ({reason(e)}){hint}") from None


def _workload(like: Workload, shape: str) -> Workload:
    """A workload of ``like``'s family with the stored ``shape``."""
    return Workload.make(like.op, like.dtype, dict(like.attrs) or None, **json.loads(shape))


def _parse(text: str) -> Measurement:
    """A stored record (read as any JSON the project reads: depth and numbers bounded)."""
    try:
        return Measurement.from_dict(parse_json(text, source="a stored record",
                                                error=DatabaseError))
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise DatabaseError(f"a stored record is malformed ({shown(str(e), 80)}); run "
                            "`autosched db check`") from None
