"""File plumbing of the suite: atomic rewrites, locked appends, the commit being measured."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
from pathlib import Path

from sim.errors import AutoschedError

__all__ = ["REPO_ROOT", "append_line", "commit_of", "read_versioned", "write_atomic"]

REPO_ROOT = Path(__file__).resolve().parents[2]


def write_atomic(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` in one step: a killed writer leaves the old file whole."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def read_versioned(path: Path, what: str, fmt: int, error: type[AutoschedError],
                   missing_hint: str) -> dict:
    """The JSON object in ``path`` whose ``format`` is ``fmt``; else ``error`` naming ``what``
    and the problem (``missing_hint`` says how to create a missing file)."""
    try:
        d = json.loads(path.read_text())
    except FileNotFoundError:
        raise error(f"no {what} at {path}: {missing_hint}") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise error(f"{what} {path} is unreadable: {e}") from None
    if not isinstance(d, dict) or d.get("format") != fmt:
        got = d.get("format") if isinstance(d, dict) else type(d).__name__
        raise error(f"{what} {path}: format {got!r}, expected {fmt}")
    return d


def append_line(path: Path, line: str) -> None:
    """Append one line under an exclusive lock, so concurrent writers never interleave."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            f.write(line.rstrip("\n") + "\n")
            f.flush()
            os.fsync(f.fileno())
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def commit_of(root: Path = REPO_ROOT) -> dict[str, object]:
    """``{"commit": sha or "unknown", "dirty": bool}`` of the checkout holding the code."""
    def git(*args: str) -> str | None:
        try:
            out = subprocess.run(["git", "-C", str(root), *args], capture_output=True,
                                 text=True, timeout=10, check=True)
        except (OSError, subprocess.SubprocessError):
            return None
        return out.stdout.strip()

    sha = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--untracked-files=no") if sha else None
    return {"commit": sha or "unknown", "dirty": bool(status)}
