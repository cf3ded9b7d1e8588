"""The contract every :class:`Database` passes, as a pytest suite to subclass.

    class TestMyDatabase(DatabaseContract):
        @pytest.fixture
        def make_db(self, tmp_path):
            return lambda: MyDatabase(tmp_path / "x")

``make_db()`` opens a new instance on one fresh store (each call: the same store), so
the suite can check durability across instances and writers in several processes
(started by fork).
"""

from __future__ import annotations

import math
import multiprocessing as mp

from autosched.measure.record import Measurement, RecordKey
from search_spaces import Schedule, Workload

__all__ = ["DatabaseContract", "record"]

W = Workload.make("gemv", m=1, n=256, k=256)
SIM = "9.9"  # the contract's "current" simulator version


def record(tile: int, latency: float, *, w: Workload = W, hw: str = "fp1", sim: str = SIM,
           version: int = 1, error: str = "", created: float | None = None) -> Measurement:
    """One GEMV measurement of schedule ``tile`` (a failure when ``error``)."""
    s = Schedule("gemv", version, (("tile", tile),))
    kw = {} if created is None else {"created": created}
    if error:
        return Measurement(w, s, hw, "hbm-pim", sim, math.inf, math.inf, 0.0, error, **kw)
    return Measurement(w, s, hw, "hbm-pim", sim, latency, 2.0 * latency, 1.0, **kw)


def key(w: Workload = W, *, hw: str = "fp1", version: int = 1, sim: str = SIM) -> RecordKey:
    return RecordKey(w, hw, "gemv", version, sim)


def _write(make_db, tiles: list[int]) -> None:
    db = make_db()
    for t in tiles:
        db.commit(record(t, float(t)))
    db.close()


class DatabaseContract:
    """The :class:`Database` contract; subclasses provide the ``make_db`` fixture."""

    def test_records_come_back_equal_and_durable(self, make_db):
        db = make_db()
        ms = [record(8, 300.0), record(16, 200.0), record(32, 0, error="does not fit")]
        for m in ms:
            assert db.commit(m) is True
        again = make_db()
        assert again.records(key()) == ms and len(again) == 3
        assert again.find(W, "fp1", ms[2].schedule, SIM) == ms[2]
        assert again.find(W, "fp1", ms[0].schedule, "0.1") is None

    def test_commit_is_idempotent(self, make_db):
        db = make_db()
        assert db.commit(record(8, 300.0)) is True
        assert db.commit(record(8, 300.0)) is False
        assert db.commit(record(8, 300.0, sim="0.1")) is True  # another key
        assert len(db) == 2 and db.count(key()) == 1

    def test_best_filters_on_the_whole_key(self, make_db):
        db = make_db()
        db.commit(record(8, 300.0))
        db.commit(record(16, 50.0, sim="0.1"))  # stale: another simulator
        db.commit(record(32, 40.0, version=2))  # stale: another space version
        db.commit(record(64, 30.0, hw="fp2"))  # other hardware
        db.commit(record(4, 10.0, error="refused"))  # failures never win
        best = db.best(key())
        assert best is not None and best.schedule.point == {"tile": 8}
        assert db.best(key(sim="0.1")).schedule.point == {"tile": 16}
        assert db.best(key(hw="nope")) is None
        assert db.stale(key()) == [(1, "0.1", 1), (2, SIM, 1)]
        assert db.count(key()) == 2

    def test_best_prefers_the_first_committed_of_equals(self, make_db):
        db = make_db()
        db.commit(record(16, 100.0, created=2.0))
        db.commit(record(8, 100.0, created=1.0))
        assert db.best(key()).schedule.point == {"tile": 16}

    def test_records_filters(self, make_db):
        db = make_db()
        other = Workload.make("gemv", m=1, n=512, k=256)
        db.commit(record(8, 1.0))
        db.commit(record(8, 2.0, w=other))
        db.commit(record(8, 3.0, hw="fp2"))
        assert len(db.records()) == 3 and len(db.records(op="gemv")) == 3
        assert [m.latency_ns for m in db.records(workload=other)] == [2.0]
        assert [m.latency_ns for m in db.records(hw_fingerprint="fp2")] == [3.0]
        assert len(db.records(sim_version="0.1")) == 0

    def test_nearest_is_ordered_by_shape_within_the_family(self, make_db):
        db = make_db()
        shapes = {(256, 256): 1.0, (512, 256): 2.0, (4096, 4096): 3.0, (300, 256): 4.0}
        for (n, k), lat in shapes.items():
            w = Workload.make("gemv", m=1, n=n, k=k)
            db.commit(record(8, lat, w=w))
            db.commit(record(16, lat / 2, w=w))
        db.commit(record(8, 1.0, w=Workload.make("gemv", "bf16", m=1, n=257, k=256)))
        db.commit(record(8, 1.0, w=Workload.make("gemv", m=1, n=258, k=256), sim="0.1"))
        q = Workload.make("gemv", m=1, n=260, k=256)
        got = [(m.workload.dims["n"], m.workload.dims["k"], m.schedule.point["tile"])
               for m in db.nearest(key(q))]
        assert got == [(256, 256, 16), (300, 256, 16), (512, 256, 16), (4096, 4096, 16)]
        assert [m.workload for m in db.nearest(key(W))][0].dims["n"] == 300

    def test_concurrent_writers_lose_and_duplicate_nothing(self, make_db):
        make_db().close()  # the store exists
        ctx = mp.get_context("fork")
        tiles = [list(range(0, 30)), list(range(15, 45)), list(range(0, 45, 3))]
        procs = [ctx.Process(target=_write, args=(make_db, t)) for t in tiles]
        for p in procs:
            p.start()
        for p in procs:
            p.join(120)
            assert p.exitcode == 0
        got = sorted(m.schedule.point["tile"] for m in make_db().records(key()))
        assert got == list(range(45))
        assert make_db().best(key()).schedule.point == {"tile": 0}
