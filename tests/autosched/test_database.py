"""Tuned-schedule database: commit/find/best, failures, corrupt files, concurrent writers."""

from __future__ import annotations

import math
import multiprocessing as mp

import pytest

from autosched.database import DatabaseError, SqlDatabase, open_database
from autosched.measure.record import Measurement
from search_spaces import Schedule, Workload

W = Workload.make("gemv", m=1, n=256, k=256)
W2 = Workload.make("gemv", m=1, n=512, k=256)


def meas(tile: int, lat: float, w: Workload = W, err: str = "") -> Measurement:
    s = Schedule("gemv", 1, (("tile", tile),))
    if err:
        return Measurement.failed(w, s, "fp1", "hbm-pim", "1.0", err)
    return Measurement(w, s, "fp1", "hbm-pim", "1.0", lat, 10.0 * lat, bound_ns=1.0)


def test_commit_find_best(tmp_path) -> None:
    db = open_database(tmp_path / "a.db")
    assert len(db) == 0 and db.best(W, "fp1") is None
    db.commit(meas(8, 300.0))
    db.commit(meas(16, 200.0))
    db.commit(meas(32, 0.0, err="register file exceeded"))
    db.commit(meas(8, 50.0, w=W2))
    assert len(db) == 4
    best = db.best(W, "fp1")
    assert best is not None and best.schedule.point == {"tile": 16} and best.latency_ns == 200.0
    assert db.best(W, "other-hw") is None
    fail = db.find(W, "fp1", meas(32, 0, err="x").schedule, "1.0")
    assert fail is not None and not fail.ok and math.isinf(fail.latency_ns)
    assert fail.error == "register file exceeded"
    assert db.find(W, "fp1", meas(8, 1).schedule, "2.0") is None  # other simulator version
    assert [m.latency_ns for m in db.records(workload=W)][:2] == [300.0, 200.0]
    assert len(db.records(op="gemv")) == 4


def test_records_survive_reopen(tmp_path) -> None:
    path = tmp_path / "b.db"
    SqlDatabase(path).commit(meas(8, 100.0))
    again = open_database(str(path))
    assert len(again) == 1 and again.records()[0] == meas(8, 100.0)


def test_corrupt_file_names_the_problem(tmp_path) -> None:
    path = tmp_path / "junk.db"
    path.write_bytes(b"this is not sqlite at all" * 100)
    with pytest.raises(DatabaseError, match="junk.db is not a usable autosched database"):
        open_database(path)


def _writer(path: str, start: int, n: int) -> None:
    db = SqlDatabase(path)
    for i in range(start, start + n):
        db.commit(meas(i, float(i + 1)))


def test_two_processes_lose_nothing(tmp_path) -> None:
    path = str(tmp_path / "c.db")
    SqlDatabase(path)  # create the schema first
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(path, s, 40)) for s in (0, 1000)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    db = SqlDatabase(path)
    tiles = sorted(m.schedule.point["tile"] for m in db.records())
    assert tiles == list(range(40)) + list(range(1000, 1040))
