"""One tuning job shared by several processes: the gate a TaskScheduler asks before measuring.

:class:`Solo` is the gate of a run alone. :class:`SharedJob` lets ``autosched tune``
processes on any machines, pointed at one SQL database, cooperate on one job
(:mod:`autosched.database.leases`): a task is measured only under its lease, which a
background thread renews; before measuring, the holder takes in what other processes
measured for the task since it last looked (so nothing is measured twice) and reserves
part of the job's budget (so the processes together spend exactly the budget); after
measuring it mirrors the task into its Optuna study in the same database
(:mod:`.mirror`) and releases the lease. A process that finds every task it wants held
by others waits for them; a lease whose holder died is taken over.
"""

from __future__ import annotations

import abc
import hashlib
import json
import threading
import time
from collections.abc import Sequence

import optuna
import sqlalchemy as sa

from autosched.measure.record import Measurement, RecordKey
from search_spaces import Workload
from sim import SIM_VERSION
from sim.hardware import Hardware

from ..database import Database, DatabaseError, SqlDatabase
from ..database.engine import reason
from ..database.leases import HEARTBEAT_S, STALE_S, LeaseBoard, LeaseState
from ..database.tagged import RunDatabase
from .mirror import StudyMirror
from .tuner import TaskTuner

__all__ = ["Gate", "SharedJob", "Solo", "job_key", "share", "task_key"]

POLL_S = 0.5  # how long a process with nothing to do waits before looking again
SNAPSHOT_S = 0.25  # how long one look at the leases answers `blocked`


class Gate(abc.ABC):
    """What a :class:`TaskScheduler` asks before and after measuring a task.

    Contract: ``grant(tuner, n)`` returns how many of ``n`` measurements the tuner may make
    now (0: not now); after a grant > 0 the scheduler records the results (possibly none)
    and calls ``settle(tuner, ms)`` once. ``blocked(tuner)`` is True when granting would
    give 0 anyway; when no task can be picked the scheduler calls ``wait()``, which
    returns True (after waiting) if work may come back and False when the job is over.
    The owner of the gate calls ``close()`` when the search ends, however it ends, and
    ``finish()`` once the run's results are safe (a run killed before that resumes).
    ``database`` is where the run commits; ``inserted`` counts its new records and
    ``measured`` the measurements it settled (equal unless something was measured twice).
    """

    database: RunDatabase | None
    measured: int = 0

    @property
    def inserted(self) -> int:
        return self.database.inserted if self.database is not None else 0

    @abc.abstractmethod
    def grant(self, tuner: TaskTuner, n: int) -> int: ...

    def settle(self, tuner: TaskTuner, ms: Sequence[Measurement]) -> None:
        """The granted measurements are recorded."""
        self.measured += len(ms)

    def blocked(self, tuner: TaskTuner) -> bool:
        return False

    def wait(self) -> bool:
        return False

    def finish(self) -> None:  # noqa: B027 (nothing to mark alone)
        """The run is complete: its job is done unless other processes still work on it."""

    def close(self) -> None:  # noqa: B027 (nothing to release alone)
        """Release everything this run holds (idempotent)."""


class Solo(Gate):
    """A run alone: every grant is granted; commits through ``database`` are counted."""

    def __init__(self, db: Database | None = None) -> None:
        self.database = db if isinstance(db, RunDatabase) or db is None else RunDatabase(db)

    def grant(self, tuner: TaskTuner, n: int) -> int:
        return n


def task_key(tuner: TaskTuner) -> RecordKey:
    return RecordKey.current(tuner.workload, tuner.hw.fingerprint, tuner.space.name,
                             tuner.space.version)


def _task(tuner: TaskTuner) -> str:
    k = task_key(tuner)
    return f"{k.workload.key}@{k.hw_fingerprint}/{k.space}v{k.space_version}/sim{k.sim_version}"


def job_key(workloads: Sequence[Workload], hw: Hardware, budget: int) -> str:
    """The job of tuning ``workloads`` on ``hw`` with ``budget`` new measurements."""
    text = json.dumps([hw.fingerprint, sorted(w.key for w in workloads), budget, SIM_VERSION])
    return hashlib.sha256(text.encode()).hexdigest()


def share(db: Database, workloads: Sequence[Workload], hw: Hardware, budget: int, *,
          mirror: bool = True, stale_s: float = STALE_S) -> Gate:
    """The gate of one run: a :class:`SharedJob` on an SQL database, else :class:`Solo`."""
    if isinstance(db, SqlDatabase):
        return SharedJob(db, job_key(workloads, hw, budget), budget, mirror=mirror,
                         stale_s=stale_s)
    return Solo(db)


class SharedJob(Gate):
    """This process's part in job ``key`` on ``db``; see the module docstring."""

    def __init__(self, db: SqlDatabase, key: str, budget: int, *, mirror: bool = True,
                 stale_s: float = STALE_S, heartbeat_s: float = HEARTBEAT_S) -> None:
        self.board = LeaseBoard(db, stale_s=stale_s)
        self.job = self.board.open_job(key, budget)
        self.database = RunDatabase(db, job=self.job, run=self.board.owner)
        self.mirror = _guard(db, lambda: StudyMirror(db.url, exists=db.execute(
            lambda c: sa.inspect(c).has_table("studies")))) if mirror else None
        self._held: set[str] = set()
        self._wanted: set[str] = set()
        self._snap: tuple[float, LeaseState] | None = None
        self._stop = threading.Event()
        self._beat = threading.Thread(target=self._heartbeat, args=(heartbeat_s,),
                                      name="autosched-lease-heartbeat", daemon=True)
        self._beat.start()

    def grant(self, tuner: TaskTuner, n: int) -> int:
        task = _task(tuner)
        if not self.board.acquire(self.job, task):
            self._snap = None  # someone else holds it: look again before the next pick
            return 0
        self._held.add(task)
        if self.database.count(task_key(tuner)) > tuner.measured:
            tuner.resume()  # other processes measured this task since we last looked
        k = self.board.reserve(self.job, task, n)
        if k == 0:  # the budget is spent or reserved by others: look again before picking
            self._release(task)
            self._snap = None
        return k

    def settle(self, tuner: TaskTuner, ms: Sequence[Measurement]) -> None:
        super().settle(tuner, ms)
        if self.mirror is not None:
            _guard(self.database.inner, lambda: self.mirror.sync(tuner))
        self._release(_task(tuner))

    def blocked(self, tuner: TaskTuner) -> bool:
        st, task = self._state(), _task(tuner)
        if task in st.held or st.available <= 0:
            self._wanted.add(task)
            return True
        return False

    def wait(self) -> bool:
        wanted, self._wanted = self._wanted, set()
        if not wanted:
            return False
        st = self._state(fresh=True)
        if st.committed >= st.budget or (st.reserved == 0 and not wanted & st.held.keys()):
            return False
        time.sleep(POLL_S)
        self._snap = None
        return True

    def finish(self) -> None:
        self.board.finish(self.job)

    def close(self) -> None:
        self._stop.set()
        if self._beat.is_alive():
            self._beat.join()
        if self._held:
            self.board.release_all()
            self._held.clear()

    def _state(self, fresh: bool = False) -> LeaseState:
        now = time.monotonic()
        if fresh or self._snap is None or now - self._snap[0] > SNAPSHOT_S:
            self._snap = (now, self.board.state(self.job))
        return self._snap[1]

    def _release(self, task: str) -> None:
        self.board.release(task)
        self._held.discard(task)

    def _heartbeat(self, every: float) -> None:
        while not self._stop.wait(every):
            try:
                self.board.heartbeat()
            except DatabaseError:
                pass  # the main thread meets the same error on its next write


def _guard(db: SqlDatabase, fn):
    """Run an Optuna storage call; its database errors become one-line DatabaseErrors."""
    try:
        return fn()
    except (sa.exc.SQLAlchemyError, optuna.exceptions.StorageInternalError) as e:
        cause = reason(e.__cause__ or e.__context__ or e)
        raise DatabaseError(f"{db.where}: cannot write the Optuna studies ({cause}); "
                            "everything committed before is kept (full disk? free space and "
                            "rerun to resume)") from None
