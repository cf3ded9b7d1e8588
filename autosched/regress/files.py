"""File plumbing of the suite: atomic rewrites, locked appends, the commit being measured.

Reads go through :mod:`sim.files` and writes through :mod:`sim.writes`, like every file
of the project (regular files only, bounded, never through a symlink).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from sim import writes
from sim.errors import AutoschedError
from sim.files import load_json, shown

__all__ = ["MAX_FILE_BYTES", "REPO_ROOT", "append_line", "commit_of", "read_versioned",
           "write_atomic"]

REPO_ROOT = Path(__file__).resolve().parents[2]
MAX_FILE_BYTES = 64 << 20  # a baseline or export is a few hundred kB; a history grows


def write_atomic(path: Path, text: str, error: type[AutoschedError] = AutoschedError) -> None:
    """Replace ``path`` with ``text`` in one step: a killed writer leaves the old file whole."""
    path.parent.mkdir(parents=True, exist_ok=True)
    writes.write_atomic(path, text, what="file", error=error)


def read_versioned(path: Path, what: str, fmt: int, error: type[AutoschedError],
                   missing_hint: str) -> dict:
    """The JSON object in ``path`` whose ``format`` is ``fmt``; else ``error`` naming ``what``
    and the problem (``missing_hint`` says how to create a missing file)."""
    if not path.exists() and not path.is_symlink():
        raise error(f"no {what} at {path}: {missing_hint}")
    try:
        d = load_json(path, limit=MAX_FILE_BYTES, what=what, error=error, nan=True)
    except error as e:
        raise error(f"{what} {path} is unreadable: {e}") from None
    if not isinstance(d, dict) or d.get("format") != fmt:
        got = d.get("format") if isinstance(d, dict) else type(d).__name__
        raise error(f"{what} {path}: format {shown(got)}, expected {fmt}")
    return d


def append_line(path: Path, line: str) -> None:
    """Append one line under an exclusive lock, so concurrent writers never interleave."""
    path.parent.mkdir(parents=True, exist_ok=True)
    writes.append_line(path, line, what="history")


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
