"""The test services stop what they start: a PostgreSQL server that does not answer a
fast shutdown is stopped before its data folder is deleted."""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path

from experiments.services import start_postgres


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_stop_stops_a_stuck_server_before_deleting_its_data() -> None:
    server = start_postgres(durable=False)
    pid = int((server.root / "data" / "postmaster.pid").read_text().split()[0])
    os.kill(pid, signal.SIGSTOP)  # it cannot answer pg_ctl's fast shutdown now
    try:
        server.stop()
        assert not _alive(pid) and not server.root.exists()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)
    server.stop()  # idempotent
