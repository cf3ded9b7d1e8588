"""The output layer: every file the project writes is written here, one way.

A write goes to a regular file or to a new path in an existing folder, never through a
symlink and never over a folder, device, FIFO or socket. It is atomic: the content goes
to a temporary file beside the target, is flushed to disk, takes the mode (and, where
allowed, the owner) of the file it replaces, or the umask's mode for a new file, and is
renamed over the target; the folder is synced after. A reader sees the old file or the
whole new one, never a part, and a failed write (a full disk) leaves the old file as it
was and no temporary file behind. :func:`append_line` adds a line to a log file under the
same rules, under an exclusive lock.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path

from .errors import AutoschedError
from .files import cut

__all__ = ["OutputError", "append_line", "check_target", "write_atomic"]


class OutputError(AutoschedError):
    """A file cannot be written where it was asked to go."""


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    return "a socket" if stat.S_ISSOCK(mode) else "not a regular file"


def check_target(path: str | Path, *, what: str = "output",
                 error: type[AutoschedError] = OutputError) -> os.stat_result | None:
    """Raise unless ``path`` may be written: its folder exists and it is a regular file
    (not a symlink) or nothing yet. Returns the stat of the file it would replace."""
    p = Path(path)
    if not p.parent.is_dir():
        raise error(f"{what} {cut(str(p))}: folder {cut(str(p.parent))} does not exist")
    try:
        st = os.lstat(p)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise error(f"{what} {cut(str(p))}: cannot be examined ({e.strerror})") from None
    if stat.S_ISLNK(st.st_mode):
        raise error(f"{what} {cut(str(p))} is a symlink; autosched never writes through "
                    "one: name the file itself")
    if not stat.S_ISREG(st.st_mode):
        raise error(f"{what} {cut(str(p))} is {_kind(st.st_mode)}; name a regular file")
    return st


def _umask_mode() -> int:
    """The mode a new file gets here (0o666 less the process umask)."""
    with contextlib.suppress(OSError, ValueError), open("/proc/self/status") as f:
        for line in f:
            if line.startswith("Umask:"):
                return 0o666 & ~int(line.split()[1], 8)
    mask = os.umask(0o022)  # no /proc: read it by setting it (briefly)
    os.umask(mask)
    return 0o666 & ~mask


def _sync_folder(folder: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def write_atomic(path: str | Path, content: str | bytes | Callable[[Path], None], *,
                 what: str = "output", error: type[AutoschedError] = OutputError) -> None:
    """Replace ``path`` with ``content`` (text, bytes, or a function writing a given path)
    atomically, under the rules of the module docstring."""
    p = Path(path)
    check_target(p, what=what, error=error)
    try:
        fd, name = tempfile.mkstemp(prefix=f".{p.name}.", suffix=p.suffix, dir=p.parent)
    except OSError as e:
        raise error(f"{what} {cut(str(p))}: cannot write in {p.parent} "
                    f"({e.strerror})") from None
    tmp = Path(name)
    try:
        try:
            if callable(content):
                os.close(fd)
                fd = -1
                content(tmp)
                fd = os.open(tmp, os.O_RDONLY)
            else:
                data = content.encode("utf-8") if isinstance(content, str) else content
                with os.fdopen(fd, "wb", closefd=False) as f:
                    f.write(data)
            os.fsync(fd)
        finally:
            if fd >= 0:
                os.close(fd)
        old = check_target(p, what=what, error=error)  # again: the target may have changed
        os.chmod(tmp, stat.S_IMODE(old.st_mode) if old else _umask_mode())
        if old is not None and (old.st_uid, old.st_gid) != (os.getuid(), os.getgid()):
            with contextlib.suppress(OSError):
                os.chown(tmp, old.st_uid, old.st_gid)
        os.replace(tmp, p)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise error(f"{what} {cut(str(p))}: cannot be written ({e.strerror or e}); the "
                    "file there is unchanged") from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _sync_folder(p.parent)


def append_line(path: str | Path, line: str, *, what: str = "log",
                error: type[AutoschedError] = OutputError) -> None:
    """Append ``line`` to the regular file ``path`` (created if missing) under an
    exclusive lock, so concurrent writers never interleave; never through a symlink."""
    p = Path(path)
    check_target(p, what=what, error=error)
    try:
        fd = os.open(p, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW
                     | os.O_NONBLOCK | os.O_CLOEXEC, _umask_mode())
    except OSError as e:
        raise error(f"{what} {cut(str(p))}: cannot be opened ({e.strerror})") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise error(f"{what} {cut(str(p))} is not a regular file")
        os.set_blocking(fd, True)
        fcntl.flock(fd, fcntl.LOCK_EX)
        data = (line.rstrip("\n") + "\n").encode("utf-8")
        while data:
            data = data[os.write(fd, data):]
        os.fsync(fd)
    except OSError as e:
        raise error(f"{what} {cut(str(p))}: cannot be written ({e.strerror})") from None
    finally:
        os.close(fd)
