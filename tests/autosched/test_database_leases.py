"""Jobs and leases of cooperating processes: join, take over, reserve, finish."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from autosched.database import SqlDatabase
from autosched.database.contract import record
from autosched.database.leases import LeaseBoard


@pytest.fixture
def db(db_url):
    return SqlDatabase(db_url)


def test_a_job_is_joined_until_done(db):
    a, b = LeaseBoard(db), LeaseBoard(db)
    job = a.open_job("k" * 64, 10)
    assert b.open_job("k" * 64, 10) == job and a.open_job("other", 10) != job
    assert a.finish(job)
    assert b.open_job("k" * 64, 10) != job  # a finished job is never resumed


def test_a_live_lease_is_exclusive_and_a_stale_one_is_taken_over(db):
    a, b = LeaseBoard(db, stale_s=0.5), LeaseBoard(db, stale_s=0.5)
    job = a.open_job("j", 10)
    assert a.acquire(job, "t") == "new" and a.acquire(job, "t") == "kept"
    assert b.acquire(job, "t") == "" and set(b.state(job).held) == {"t"}
    time.sleep(0.3)
    assert a.heartbeat() == 1 and b.acquire(job, "t") == ""
    time.sleep(0.7)  # a stopped renewing
    assert b.acquire(job, "t") == "taken" and a.acquire(job, "t") == ""
    b.release("t")
    assert a.acquire(job, "t") == "new"


def test_the_lease_of_a_dead_process_on_this_host_is_taken_at_once(db):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    ghost = LeaseBoard(db, owner=f"{LeaseBoard(db).owner.split(':')[0]}:{dead}:x")
    job = ghost.open_job("j", 10)
    assert ghost.acquire(job, "t") == "new"
    assert LeaseBoard(db).acquire(job, "t") == "taken"


def test_reservations_share_the_budget_and_return_with_the_lease(db):
    a, b = LeaseBoard(db), LeaseBoard(db)
    job = a.open_job("j", 10)
    assert a.acquire(job, "t1") and b.acquire(job, "t2")
    assert a.reserve(job, "t1", 6) == 6 and b.reserve(job, "t2", 8) == 4
    assert (b.state(job).available, b.state(job).reserved) == (4, 6)  # others' only
    assert (a.state(job).available, a.state(job).reserved) == (6, 4)
    for i in range(3):  # a commits 3 of its 6 and gives the rest back
        db.commit(record(i, 1.0), job=job, run=a.owner)
    a.release("t1")
    assert b.reserve(job, "t2", 8) == 7  # 10 - 3 committed
    assert not a.finish(job)  # b still holds a lease in the job
    b.release("t2")
    assert a.finish(job)
