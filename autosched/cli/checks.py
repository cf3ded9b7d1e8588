"""Command-line values checked before any work, and files written so nothing is lost.

Every check raises an :class:`AutoschedError` naming the flag and what to fix (the CLI
prints it as one line and exits 2). Output files are checked before a long command
starts (folder exists, a regular file or a new path, not a database, not overwritten
unless ``--force``) and written through :mod:`sim.writes` (atomic, never through a
symlink or over a device, the replaced file's mode kept). The numbers every flag takes
are bounded at parse time by :mod:`autosched.cli.numbers`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from sim.errors import AutoschedError
from sim.writes import check_target
from sim.writes import write_atomic as _write_atomic

__all__ = ["is_database_file", "output_file", "positive", "write_atomic"]

_SQLITE_MAGIC = b"SQLite format 3\x00"


def positive(value: int | None, flag: str) -> int | None:
    """``value`` if it is None or an int >= 1; 0 and negatives are refused."""
    if value is not None and value < 1:
        raise AutoschedError(f"{flag} must be >= 1, got {value}")
    return value


def is_database_file(path: Path) -> bool:
    """True for an SQLite database file (ours or anyone's); never blocks on a FIFO."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    with os.fdopen(fd, "rb") as f:
        try:
            return os.path.isfile(path) and f.read(len(_SQLITE_MAGIC)) == _SQLITE_MAGIC
        except OSError:
            return False


def output_file(path: str | Path, flag: str, *, force: bool = False,
                protect: tuple[str | Path, ...] = ()) -> Path:
    """Check that ``path`` may be written: its folder exists, it is a regular file (not a
    symlink, folder, device or FIFO) or a new path, not a database (never, even with
    ``force``) nor one of ``protect``, and, unless ``force``, not an existing file."""
    p = Path(path).expanduser()
    if p.is_dir() and not p.is_symlink():
        raise AutoschedError(f"{flag} {path} is a folder; name a file")
    check_target(p, what=flag)
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


def write_atomic(path: Path, write: Callable[[Path], None] | str | bytes) -> None:
    """Write ``path`` through :func:`sim.writes.write_atomic`: ``write(tmp)`` (or the text
    or bytes given) to a temporary file beside it, then renamed over it."""
    _write_atomic(path, write)
