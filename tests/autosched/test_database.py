"""The SQL database beyond the contract: schema creation by several processes at once,
migration of schema-1 databases, newer and foreign databases, locations, the nearest
workload at scale."""

from __future__ import annotations

import itertools
import json
import math
import multiprocessing as mp
import random
import sqlite3

import pytest
import sqlalchemy as sa

from autosched.database import DatabaseError, RecordKey, SqlDatabase, open_database
from autosched.database.contract import SIM, key, record
from autosched.database.nearest import shape_distance
from autosched.database.schema import SCHEMA_VERSION
from search_spaces import Workload

W = Workload.make("gemv", m=1, n=256, k=256)


def _v1(url: str, rows: list) -> None:
    """A database as schema 1 wrote it (tables, indexes and rows), duplicates allowed."""
    meta = sa.MetaData()
    cols = [sa.Column("id", sa.Integer, primary_key=True, autoincrement=True)] + [
        sa.Column(n, t, nullable=n in ("latency_ns", "energy_pj")) for n, t in (
            ("workload_key", sa.String(256)), ("op", sa.String(32)), ("shape", sa.Text),
            ("hw_fingerprint", sa.String(64)), ("hw_name", sa.String(128)),
            ("space", sa.String(64)), ("space_version", sa.Integer),
            ("sim_version", sa.String(32)), ("schedule_key", sa.String(512)),
            ("latency_ns", sa.Float), ("energy_pj", sa.Float), ("error", sa.Text),
            ("record", sa.Text), ("created", sa.Float))]
    m = sa.Table("measurements", meta, *cols,
                 sa.Index("ix_exact", "workload_key", "hw_fingerprint", "schedule_key",
                          "sim_version"),
                 sa.Index("ix_lookup", "workload_key", "hw_fingerprint", "space",
                          "space_version"))
    sa.Table("plans", meta, sa.Column("key", sa.String(256), primary_key=True),
             sa.Column("hw_fingerprint", sa.String(64), primary_key=True),
             sa.Column("plan", sa.Text), sa.Column("latency_ns", sa.Float),
             sa.Column("created", sa.Float))
    info = sa.Table("autosched_info", meta, sa.Column("key", sa.String(64), primary_key=True),
                    sa.Column("value", sa.String(256)))
    engine = sa.create_engine(url)
    with engine.begin() as c:
        meta.create_all(c)
        c.execute(info.insert().values(key="schema", value="1"))
        for r in rows:
            d = r.to_dict()
            c.execute(m.insert().values(
                workload_key=r.workload.key, op=r.workload.op, shape=json.dumps(r.workload.dims),
                hw_fingerprint=r.hw_fingerprint, hw_name=r.hw_name, space=r.schedule.space,
                space_version=r.schedule.version, sim_version=r.sim_version,
                schedule_key=r.schedule.key, latency_ns=d["latency_ns"],
                energy_pj=d["energy_pj"], error=r.error, record=json.dumps(d),
                created=r.created))
    engine.dispose()


def test_schema_1_is_upgraded_in_place_keeping_every_record(db_url):
    other = Workload.make("gemv", m=1, n=512, k=256)
    rows = [record(8, 300.0), record(16, 200.0), record(16, 200.0),  # a v1 duplicate
            record(4, 0, error="refused"), record(8, 90.0, w=other), record(2, 5.0, sim="0.1")]
    _v1(db_url, rows)
    db = SqlDatabase(db_url)
    assert len(db) == 5 and db.records() == [rows[i] for i in (0, 1, 3, 4, 5)]
    assert db.best(key()).schedule.point == {"tile": 16} and db.count(key()) == 3
    assert [m.workload for m in db.nearest(key())] == [other]
    assert db.stale(key()) == [(1, "0.1", 1)]
    assert db.commit(record(16, 200.0)) is False and db.commit(record(32, 1.0)) is True
    with sa.create_engine(db_url).connect() as c:
        assert c.execute(sa.text("SELECT value FROM autosched_info")).scalar() == "2"
    assert len(SqlDatabase(db_url)) == 6  # opening again changes nothing


def test_a_newer_schema_is_refused_untouched(db_url):
    SqlDatabase(db_url).commit(record(8, 1.0))
    engine = sa.create_engine(db_url)
    with engine.begin() as c:
        c.execute(sa.text("UPDATE autosched_info SET value = :v"), {"v": str(SCHEMA_VERSION + 1)})
    with pytest.raises(DatabaseError, match="schema version 3, newer than this autosched"):
        SqlDatabase(db_url)
    with engine.connect() as c:
        assert c.execute(sa.text("SELECT count(*) FROM measurements")).scalar() == 1
    engine.dispose()


def _open_and_commit(url: str, i: int, out) -> None:
    try:
        db = SqlDatabase(url)
        db.commit(record(i, float(i)))
        db.commit(record(100, 100.0))  # every process commits this one
        out.put("ok")
    except Exception as e:  # noqa: BLE001 (the parent reports it)
        out.put(f"{type(e).__name__}: {e}")


def test_several_processes_create_a_new_database_together(db_url):
    ctx = mp.get_context("fork")
    out = ctx.Queue()
    procs = [ctx.Process(target=_open_and_commit, args=(db_url, i, out)) for i in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert sorted(out.get(timeout=5) for _ in procs) == ["ok"] * 4
    db = SqlDatabase(db_url)
    assert sorted(m.schedule.point["tile"] for m in db.records()) == [0, 1, 2, 3, 100]


def test_a_corrupt_file_names_the_problem(tmp_path):
    path = tmp_path / "junk.db"
    path.write_bytes(b"this is not sqlite at all" * 100)
    with pytest.raises(DatabaseError, match="junk.db is not a usable autosched database"):
        open_database(path)


def test_a_foreign_file_is_refused_and_left_as_it_was(tmp_path):
    path = tmp_path / "app.db"
    with sqlite3.connect(path) as c:
        c.execute("CREATE TABLE jobs (id INTEGER)")  # a name we use too
    before = path.read_bytes()
    with pytest.raises(DatabaseError, match="belongs to another application"):
        open_database(path)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["app.db"]


def test_an_empty_file_and_an_optuna_database_are_adopted(tmp_path):
    import optuna

    (tmp_path / "empty.db").touch()
    assert len(open_database(tmp_path / "empty.db")) == 0
    optuna.create_study(storage=f"sqlite:///{tmp_path / 'o.db'}", study_name="s")
    assert len(open_database(tmp_path / "o.db")) == 0


def test_a_missing_folder_is_one_line(tmp_path):
    with pytest.raises(DatabaseError, match="folder .* does not exist"):
        open_database(tmp_path / "no" / "x.db")


def test_nearest_matches_the_full_scan_on_random_shapes(tmp_path):
    """The indexed search returns exactly the order of a scan over every workload."""
    rng = random.Random(5)
    db = SqlDatabase(tmp_path / "n.db")
    shapes = {(rng.choice([1, 2, 4]), 2 ** rng.randint(4, 14), rng.randint(16, 20000))
              for _ in range(400)}
    ms = [record(8, float(n + k), w=Workload.make("gemv", m=m, n=n, k=k)) for m, n, k in shapes]
    db.commit_many(ms)
    for i in range(12):
        q = Workload.make("gemv", m=rng.choice([1, 3]), n=rng.randint(8, 40000),
                          k=rng.randint(8, 40000))
        n = len(ms) if i == 0 else 25  # the whole order once, then the head
        got = [m.workload.key for m in
               itertools.islice(db.nearest(RecordKey(q, "fp1", "gemv", 1, SIM)), n)]
        want = sorted((x for x in ms if x.workload != q),
                      key=lambda x: (shape_distance(q, x.workload), x.workload.key))[:n]
        assert got == [x.workload.key for x in want]
        assert all(math.isfinite(shape_distance(q, x.workload)) for x in want)
