"""The tuned-schedule database: every measurement, best schedule per workload and hardware."""

from __future__ import annotations

from pathlib import Path

from .base import Database, DatabaseError
from .sql import SqlDatabase

__all__ = ["Database", "DatabaseError", "SqlDatabase", "open_database"]


def open_database(db: str | Path | Database) -> Database:
    """A path or SQLAlchemy URL becomes a database; an instance passes through."""
    return db if isinstance(db, Database) else SqlDatabase(db)
