"""One rule for where a database may be, applied by every command before it opens one.

``--db`` is a file path or an SQLAlchemy URL. Refused at once, with one line and before
anything is created:

* an in-memory SQLite URL (``sqlite://``): each connection would see its own empty
  database and nothing would be kept;
* a path (or ``sqlite:///`` file) naming a folder, a device, a FIFO or a socket;
* for a command that only reads (``lookup``, ``db``, ``compile``, ``simulate``, ``run``,
  ``kernels``): a missing or empty file, which is never given a schema.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from sim.files import cut

from .base import DatabaseError
from .engine import is_sqlite, normalise, sqlite_path

__all__ = ["check_location", "sqlite_file"]


def sqlite_file(where: str | Path) -> Path | None:
    """The file of a path or SQLite URL (None for a server URL); an in-memory SQLite URL
    is refused."""
    url, display = normalise(where)
    if not is_sqlite(url):
        return None
    path = sqlite_path(url)
    if path is None:
        raise DatabaseError(f"{display} is an in-memory database: every connection would "
                            "see its own empty one and nothing would be kept; give a file "
                            "(a path, or sqlite:///path)")
    return path


def check_location(where: str | Path, *, must_exist: bool = False) -> None:
    """Raise :class:`DatabaseError` if ``where`` cannot hold a database (see the module
    docstring); ``must_exist``: the command reads and never creates."""
    path = sqlite_file(where)
    if path is None:
        return
    shown = cut(str(where), 200)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        if must_exist:
            raise DatabaseError(f"no database at {shown}: run `autosched tune` first or pass "
                                "--db") from None
        return
    except OSError as e:
        raise DatabaseError(f"{shown}: cannot be examined ({e.strerror})") from None
    if stat.S_ISDIR(st.st_mode):
        raise DatabaseError(f"--db {shown} is a folder; name a database file (e.g. "
                            f"{cut(str(path / 'autosched.db'), 200)})")
    if not stat.S_ISREG(st.st_mode):
        raise DatabaseError(f"--db {shown} is not a regular file (a device, FIFO or socket); "
                            "name a database file")
    if must_exist and st.st_size == 0:
        raise DatabaseError(f"{shown} is an empty file, not an autosched database: run "
                            "`autosched tune` to create one there, or pass --db")
