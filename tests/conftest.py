"""Services for the tests that need them: a throwaway PostgreSQL server and a Dask cluster.

Both start on first use (once per session, from ``experiments/services.py``) and stop
at its end. A service that cannot start makes the tests that need it fail (an error,
never a skip): CI runs against the real servers or fails.

The tests that start whole processes (``autosched tune`` under faults, notebook
kernels, the search benchmark's table) run first: a parallel run then ends on short
tests instead of waiting for one long one.
"""

from __future__ import annotations

import pytest

from experiments.services import start_dask, start_postgres

LONG_FIRST = ("tests/faults/", "tests/experiments/test_notebooks.py",
              "tests/experiments/test_bench_search.py")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The long tests first, each group in collection order (a stable sort)."""
    root = config.rootpath

    def late(item: pytest.Item) -> bool:
        path = item.path.relative_to(root).as_posix() if item.path.is_relative_to(root) else ""
        return not path.startswith(LONG_FIRST)

    items.sort(key=late)


@pytest.fixture(scope="session")
def postgres():
    """A private PostgreSQL server on 127.0.0.1 (fsync off: throwaway data)."""
    server = start_postgres(durable=False)
    yield server
    server.stop()


@pytest.fixture
def pg_url(postgres) -> str:
    """The URL of a new, empty PostgreSQL database."""
    return postgres.new_database()


@pytest.fixture(scope="session")
def dask_cluster():
    """A Dask scheduler with two single-threaded worker processes (restarted if killed)."""
    cluster = start_dask(2)
    yield cluster
    cluster.stop()


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request, tmp_path) -> str:
    """A new database of each kind: a SQLite file not created yet, an empty PostgreSQL one."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'new.db'}"
    return request.getfixturevalue("pg_url")
