"""Every database implementation and location passes the Database contract."""

from __future__ import annotations

import pytest

from autosched.database import SqlDatabase
from autosched.database.contract import DatabaseContract


class TestSqliteFile(DatabaseContract):
    @pytest.fixture
    def make_db(self, tmp_path):
        return lambda: SqlDatabase(tmp_path / "c.db")


class TestSqliteUrl(DatabaseContract):
    @pytest.fixture
    def make_db(self, tmp_path):
        return lambda: SqlDatabase(f"sqlite:///{tmp_path / 'c.db'}")


class TestPostgres(DatabaseContract):
    @pytest.fixture
    def make_db(self, pg_url):
        return lambda: SqlDatabase(pg_url)
