"""Jobs and task leases: several tuning processes sharing one database and one budget.

A *job* is one tuning goal (the tasks of a model step on one hardware, with a budget of
new measurements); processes started for the same goal join the job that is not done
yet, so a rerun after a crash resumes it and two machines started together share it.
The budget is spent when the measurements tagged with the job reach it.

A *lease* gives one process the right to measure one task (a record key without the
schedule) for a while. The holder renews it (``heartbeat``); a lease is *stale* when its
heartbeat is older than ``stale_s`` or when its owner ran on this host and its process is
gone, and anyone may then take it over. A holder *reserves* part of the job's budget
before measuring; reservations of live leases count as spent for everyone else, so
processes never overspend, and a dead process's reservation returns with its lease.

Every operation is one transaction (SQLite: under the write lock; PostgreSQL: a
conditional update, or the job row locked ``FOR UPDATE``). Times come from the database
server's clock, so hosts need not agree on theirs.
"""

from __future__ import annotations

import hashlib
import os
import socket
import uuid
from dataclasses import dataclass

import sqlalchemy as sa

from .engine import db_now
from .schema import jobs, leases, measurements
from .sql import SqlDatabase

__all__ = ["HEARTBEAT_S", "STALE_S", "LeaseBoard", "LeaseState"]

HEARTBEAT_S = 5.0  # how often a holder renews its leases
STALE_S = 60.0  # a lease not renewed for this long is taken over


def _alive(owner: str) -> bool:
    """False only when ``owner`` ran on this host and its process no longer exists."""
    host, _, rest = owner.partition(":")
    pid = rest.partition(":")[0]
    if host != socket.gethostname() or not pid.isdigit():
        return True
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass(frozen=True)
class LeaseState:
    """One look at a job: its budget, what is committed, and who holds which task."""

    budget: int
    committed: int
    held: dict[str, str]  # task -> owner, live leases of others only
    reserved: int  # budget reserved by others' live leases of this job

    @property
    def available(self) -> int:
        """What this owner may reserve, its own current reservations included."""
        return self.budget - self.committed - self.reserved


class LeaseBoard:
    """The jobs and leases of one :class:`SqlDatabase`, seen by one ``owner`` (a process).

    Not thread-safe except :meth:`heartbeat`, which a background thread may call.
    """

    def __init__(self, db: SqlDatabase, *, stale_s: float = STALE_S,
                 owner: str | None = None) -> None:
        self.db, self.stale_s = db, stale_s
        self.owner = owner or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"

    # ------------------------------------------------------------------ jobs
    def open_job(self, key: str, budget: int) -> int:
        """The id of the unfinished job ``key`` (joined), or of a new one with ``budget``."""
        def op(c: sa.Connection) -> int:
            if c.dialect.name == "postgresql":
                c.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"),
                          {"k": int(hashlib.sha256(key.encode()).hexdigest()[:15], 16)})
            row = c.execute(sa.select(jobs.c.id).where(jobs.c.key == key, jobs.c.done.is_(False))
                            .order_by(jobs.c.id.desc()).limit(1)).first()
            if row is not None:
                return int(row[0])
            return int(c.execute(jobs.insert().values(key=key, budget=budget, done=False,
                                                      created=db_now(c))).inserted_primary_key[0])
        return self.db.execute(op, write=True)

    def finish(self, job: int) -> bool:
        """Mark ``job`` done unless another live process still holds a lease in it."""
        def op(c: sa.Connection) -> bool:
            now = db_now(c)
            rows = c.execute(sa.select(leases.c.owner, leases.c.heartbeat)
                             .where(leases.c.job == job, leases.c.owner != self.owner)).all()
            if any(self._live(o, hb, now) for o, hb in rows):
                return False
            c.execute(jobs.update().where(jobs.c.id == job).values(done=True))
            return True
        return self.db.execute(op, write=True)

    def state(self, job: int) -> LeaseState:
        """Budget and committed measurements of ``job``, and every live lease of others
        (few: one per task being measured anywhere right now)."""
        def op(c: sa.Connection) -> LeaseState:
            now = db_now(c)
            budget = c.execute(sa.select(jobs.c.budget).where(jobs.c.id == job)).scalar_one()
            rows = c.execute(sa.select(leases).where(leases.c.owner != self.owner)).all()
            live = [r for r in rows if self._live(r.owner, r.heartbeat, now)]
            return LeaseState(int(budget), self._committed(c, job),
                              {r.task: r.owner for r in live},
                              sum(r.reserved for r in live if r.job == job))
        return self.db.execute(op)

    # ------------------------------------------------------------------ leases
    def acquire(self, job: int, task: str) -> str:
        """Take the lease of ``task``: "new", "kept" (ours already), "taken" (over from a
        stale holder), or "" when a live process holds it."""
        def op(c: sa.Connection) -> str:
            now = db_now(c)
            row = c.execute(sa.select(leases).where(leases.c.task == task)).first()
            if row is None:
                ins = leases.insert().values(task=task, owner=self.owner, job=job,
                                             heartbeat=now, reserved=0)
                try:
                    with c.begin_nested():
                        c.execute(ins)
                except sa.exc.IntegrityError:
                    return ""  # another process inserted it first
                return "new"
            if row.owner != self.owner and self._live(row.owner, row.heartbeat, now):
                return ""
            done = c.execute(leases.update().where(
                leases.c.task == task, leases.c.owner == row.owner,
                leases.c.heartbeat == row.heartbeat)
                .values(owner=self.owner, job=job, heartbeat=now, reserved=0)).rowcount
            if not done:
                return ""
            return "kept" if row.owner == self.owner else "taken"
        return self.db.execute(op, write=True)

    def reserve(self, job: int, task: str, n: int) -> int:
        """Reserve up to ``n`` of the job's budget on our lease of ``task``; returns how many."""
        def op(c: sa.Connection) -> int:
            q = sa.select(jobs.c.budget).where(jobs.c.id == job)
            if c.dialect.name == "postgresql":
                q = q.with_for_update()
            budget = int(c.execute(q).scalar_one())
            now = db_now(c)
            rows = c.execute(sa.select(leases).where(leases.c.job == job)).all()
            held = sum(r.reserved for r in rows if r.task != task
                       and self._live(r.owner, r.heartbeat, now))
            k = max(0, min(n, budget - self._committed(c, job) - held))
            c.execute(leases.update().where(leases.c.task == task, leases.c.owner == self.owner)
                      .values(reserved=k, heartbeat=now))
            return k
        return self.db.execute(op, write=True)

    def release(self, task: str) -> None:
        """Give up our lease of ``task`` (and its reservation); no-op if not ours."""
        self.db.execute(lambda c: c.execute(leases.delete().where(
            leases.c.task == task, leases.c.owner == self.owner)), write=True)

    def release_all(self) -> None:
        self.db.execute(lambda c: c.execute(leases.delete().where(leases.c.owner == self.owner)),
                     write=True)

    def heartbeat(self) -> int:
        """Renew every lease we hold; returns how many."""
        def op(c: sa.Connection) -> int:
            return c.execute(leases.update().where(leases.c.owner == self.owner)
                             .values(heartbeat=db_now(c))).rowcount
        return self.db.execute(op, write=True)

    # ------------------------------------------------------------------ helpers
    def _live(self, owner: str, heartbeat: float, now: float) -> bool:
        return heartbeat >= now - self.stale_s and _alive(owner)

    @staticmethod
    def _committed(c: sa.Connection, job: int) -> int:
        return int(c.execute(sa.select(sa.func.count()).select_from(measurements)
                             .where(measurements.c.job == job)).scalar_one())
