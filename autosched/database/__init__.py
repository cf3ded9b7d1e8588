"""The tuned-schedule database: every measurement, best schedule per record key.

:class:`Database` is the interface (its docstring states the contract, which
:mod:`autosched.database.contract` checks); :class:`SqlDatabase` stores it in SQLite or
PostgreSQL; :mod:`.leases` coordinates several tuning processes on one database.
"""

from __future__ import annotations

from pathlib import Path

from autosched.measure.record import RecordKey

from .base import Database, DatabaseError
from .sql import SqlDatabase

__all__ = ["Database", "DatabaseError", "RecordKey", "SqlDatabase", "open_database"]


def open_database(db: str | Path | Database, *, readonly: bool = False) -> Database:
    """A path or SQLAlchemy URL becomes a database; an instance passes through.

    ``readonly``: the database must exist (a missing or empty file is refused, never given
    a schema) and is only read. Where a database may be at all: :mod:`.where`.
    """
    if isinstance(db, Database):
        return db
    return SqlDatabase(db, readonly=True) if readonly else SqlDatabase(db)
