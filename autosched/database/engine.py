"""Where a database lives: path or URL checks, drivers, engines and transactions.

SQLite files run in WAL mode; every write transaction starts with ``BEGIN IMMEDIATE``
(it waits for the write lock instead of failing with "database is locked" when two
processes upgrade a read to a write at once). PostgreSQL URLs use the psycopg driver
(``postgresql://`` means ``postgresql+psycopg://``). Problems with the location itself
(a missing folder, a missing driver, a malformed URL) are one-line
:class:`DatabaseError`\\ s; a password in a URL never appears in a message.
"""

from __future__ import annotations

import importlib.util
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import make_url

from .base import DatabaseError

__all__ = ["db_now", "is_sqlite", "make_engine", "normalise", "reason", "sqlite_path",
           "sqlite_tables", "transaction"]

BUSY_TIMEOUT_S = 60
_SCHEMES = {"postgresql": "postgresql+psycopg", "postgres": "postgresql+psycopg"}


def normalise(where: str | Path) -> tuple[str, str]:
    """(SQLAlchemy URL, display text without password) for a path or URL."""
    text = str(where)
    if "://" not in text:
        path = Path(text).expanduser()
        return f"sqlite:///{path}", str(path)
    try:
        url = make_url(text)
    except Exception as e:  # noqa: BLE001 (SQLAlchemy raises ValueError or ArgumentError)
        raise DatabaseError(f"{_hide(text)} is not a valid database URL ({e})") from None
    url = url.set(drivername=_SCHEMES.get(url.drivername, url.drivername))
    try:
        url.port  # noqa: B018 (a non-numeric port raises here)
    except ValueError as e:
        raise DatabaseError(f"{_hide(text)} is not a valid database URL ({e})") from None
    return url.render_as_string(hide_password=False), url.render_as_string(hide_password=True)


def _hide(text: str) -> str:
    head, sep, tail = text.partition("://")
    creds, at, host = tail.rpartition("@")
    if at and ":" in creds:
        return f"{head}{sep}{creds.split(':', 1)[0]}:***@{host}"
    return text


def is_sqlite(url: str) -> bool:
    return url.startswith("sqlite")


def sqlite_path(url: str) -> Path | None:
    """The file of an SQLite URL (None for an in-memory database)."""
    db = make_url(url).database
    return Path(db) if db and db != ":memory:" else None


def sqlite_tables(path: Path, display: str) -> set[str] | None:
    """Table names of an existing SQLite file, read without changing it; None if the
    file is missing or empty."""
    if not path.exists() or path.stat().st_size == 0:
        return None
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_S)
        try:
            rows = conn.execute("SELECT name FROM sqlite_master WHERE type='table'").fetchall()
        finally:
            conn.close()
    except sqlite3.Error as e:
        raise DatabaseError(f"{display} is not a usable autosched database ({e}); "
                            "pass another --db") from None
    return {r[0] for r in rows}


def make_engine(url: str, display: str, *, readonly: bool = False) -> sa.Engine:
    """An engine for ``url``: SQLite tuned for several processes (``readonly``: the file
    opened read-only, never written), or a server database."""
    if is_sqlite(url):
        path = sqlite_path(url)
        if path is not None and not path.parent.is_dir():
            raise DatabaseError(f"{display}: folder {path.parent} does not exist")
        if readonly and path is not None:
            engine = sa.create_engine(f"sqlite:///file:{quote(str(path.resolve()))}"
                                      "?mode=ro&uri=true",
                                      connect_args={"timeout": BUSY_TIMEOUT_S})
        else:
            engine = sa.create_engine(url, connect_args={"timeout": BUSY_TIMEOUT_S})
        configure_sqlite(engine, readonly=readonly)
        return engine
    name = make_url(url).get_backend_name()
    if name == "postgresql" and importlib.util.find_spec("psycopg") is None:
        raise DatabaseError(f"{display}: PostgreSQL needs the psycopg driver; install it "
                            "with `pip install 'autosched[postgres]'`")
    kw = {"connect_args": {"connect_timeout": 10}} if name == "postgresql" else {}
    try:
        return sa.create_engine(url, pool_pre_ping=True, **kw)
    except (ImportError, sa.exc.NoSuchModuleError, sa.exc.ArgumentError) as e:
        raise DatabaseError(f"{display}: no usable driver for this URL ({e}); install "
                            "one or use a SQLite path or a postgresql:// URL") from None


def configure_sqlite(engine: sa.Engine, *, readonly: bool = False) -> None:
    """WAL, a busy timeout, and ``BEGIN IMMEDIATE`` unless a connection asks for a read
    (``readonly``: the journal mode is left as it is).

    Also applied to Optuna's engine on the same file, so its writers queue for the lock.
    """

    @event.listens_for(engine, "connect")
    def _connect(dbapi_conn, _record) -> None:
        dbapi_conn.isolation_level = None  # SQLAlchemy's begin event emits BEGIN below
        cur = dbapi_conn.cursor()
        cur.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_S * 1000}")
        if not readonly:
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
        cur.close()

    @event.listens_for(engine, "begin")
    def _begin(conn) -> None:
        read = conn.get_execution_options().get("autosched_read", False)
        conn.exec_driver_sql("BEGIN" if read else "BEGIN IMMEDIATE")


@contextmanager
def transaction(engine: sa.Engine, *, write: bool) -> Iterator[sa.Connection]:
    """One transaction; a write one holds the write lock (SQLite) from its first statement."""
    with engine.connect() as conn:
        if not write:
            conn.execution_options(autosched_read=True)
        with conn.begin():
            yield conn


def db_now(conn: sa.Connection) -> float:
    """The database server's clock in seconds since the epoch (one clock for all hosts)."""
    name = conn.dialect.name
    if name == "postgresql":
        return float(conn.exec_driver_sql("SELECT extract(epoch from clock_timestamp())")
                     .scalar_one())
    if name == "sqlite":
        return float(conn.exec_driver_sql("SELECT (julianday('now') - 2440587.5) * 86400.0")
                     .scalar_one())
    import time

    return time.time()


def reason(e: BaseException) -> str:
    """The driver's message of a SQLAlchemy error, on one line."""
    orig = getattr(e, "orig", None)
    text = str(orig) if orig is not None else (str(e) or type(e).__name__)
    return " ".join(text.split())
