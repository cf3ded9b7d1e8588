"""Command-line values checked before any work, and files written so nothing is lost.

Every check raises an :class:`AutoschedError` naming the flag and what to fix (the CLI
prints it as one line and exits 2). Output files are checked before a long command
starts (folder exists, not a database, not overwritten unless ``--force``) and written
atomically: to a temporary file in the same folder, then renamed over the target.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from sim.errors import AutoschedError

__all__ = ["is_database_file", "output_file", "positive", "write_atomic"]

_SQLITE_MAGIC = b"SQLite format 3\x00"


def positive(value: int | None, flag: str) -> int | None:
    """``value`` if it is None or an int >= 1; 0 and negatives are refused."""
    if value is not None and value < 1:
        raise AutoschedError(f"{flag} must be >= 1, got {value}")
    return value


def is_database_file(path: Path) -> bool:
    """True for an SQLite database file (ours or anyone's)."""
    try:
        with open(path, "rb") as f:
            return f.read(len(_SQLITE_MAGIC)) == _SQLITE_MAGIC
    except OSError:
        return False


def output_file(path: str | Path, flag: str, *, force: bool = False,
                protect: tuple[str | Path, ...] = ()) -> Path:
    """Check that ``path`` may be written: its folder exists, it is not a folder, not a
    database (never, even with ``force``) nor one of ``protect``, and, unless ``force``,
    not an existing file."""
    p = Path(path).expanduser()
    if not p.parent.is_dir():
        raise AutoschedError(f"{flag} {path}: folder {p.parent} does not exist")
    if p.is_dir():
        raise AutoschedError(f"{flag} {path} is a folder; name a file")
    for other in protect:
        o = Path(other).expanduser()
        if "://" not in str(other) and p.exists() and o.exists() and os.path.samefile(p, o):
            raise AutoschedError(f"{flag} {path} is the database itself; name another file")
    if is_database_file(p):
        raise AutoschedError(f"{flag} {path} is a database; autosched never overwrites one")
    if p.exists() and not force:
        raise AutoschedError(f"{flag} {path} exists; pass --force to overwrite it")
    if not os.access(p.parent, os.W_OK):
        raise AutoschedError(f"{flag} {path}: folder {p.parent} is not writable")
    return p


def write_atomic(path: Path, write: Callable[[Path], None]) -> None:
    """``write(tmp)`` to a temporary file beside ``path``, then rename it to ``path``
    (readers see the old file or the whole new one, never a part)."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=path.suffix, dir=path.parent)
    os.close(fd)
    try:
        write(Path(tmp))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
