"""``autosched lookup``: exact, nearest and default answers, text and JSON."""

from __future__ import annotations

import json
import re

import pytest
from test_tune import FakeLowering, fake_latency, fakes  # noqa: F401  (fixture)

from autosched.cli import main
from autosched.database import open_database
from autosched.measure.record import Measurement
from search_spaces import Schedule, Workload
from sim import SIM_VERSION
from sim.hwio import load_hardware

W = Workload.make("gemv", m=1, n=64, k=64)


@pytest.fixture
def db(tmp_path, fakes):  # noqa: F811
    """A database holding two measurements of W on hbm-pim (p=3 is the faster)."""
    hw, low = load_hardware("hbm-pim"), FakeLowering()
    path = tmp_path / "t.db"
    d = open_database(path)
    for p in (1, 3):
        s = Schedule.of(low.space(W, hw), {"p": p})
        d.commit(Measurement(W, s, hw.fingerprint, hw.name, SIM_VERSION, fake_latency(W, p), 1.0))
    return path


def _lookup(db, shape: str, *extra: str) -> dict:
    return ["lookup", "--op", "gemv", "--shape", shape, "--db", str(db), *extra]


def test_exact_match_reports_the_best_schedule(db, capsys):
    assert main(_lookup(db, "m=1,n=64,k=64", "--json")) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["kind"] == "exact" and d["schedule"]["params"] == {"p": 3}
    assert d["latency_ns"] == pytest.approx(fake_latency(W, 3))


def test_a_tuned_shape_far_from_the_query_is_not_reused(db, capsys):
    # n 64 -> 320: |log 5| = 1.61 > NEAREST_RADIUS; n 64 -> 288: 1.50, still near
    assert main(_lookup(db, "m=1,n=320,k=64", "--json")) == 0
    assert json.loads(capsys.readouterr().out)["kind"] == "default"
    assert main(_lookup(db, "m=1,n=288,k=64", "--json")) == 0
    assert json.loads(capsys.readouterr().out)["kind"] == "nearest"


def test_nearest_names_the_workload_it_came_from(db, capsys):
    assert main(_lookup(db, "m=1,n=96,k=64")) == 0
    out = capsys.readouterr().out
    assert "nearest" in out and W.key in out and re.search(r"\n\s+p\s+3\n", out)
    assert "measured ns there" in out


def test_default_when_nothing_matches(db, capsys):
    assert main(_lookup(db, "m=1,n=64,k=64", "--dtype", "bf16", "--json")) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["kind"] == "default" and d["schedule"]["params"] == {"p": 1}
    assert d["from_workload"] is None
    assert main(_lookup(db, "m=1,n=64,k=64", "--hw", "aim-gddr6")) == 0
    assert "default" in capsys.readouterr().out


def test_missing_database_falls_back_to_default(tmp_path, fakes, capsys):  # noqa: F811
    assert main(_lookup(tmp_path / "none.db", "m=1,n=64,k=64")) == 0
    assert "no database at" in capsys.readouterr().out
    assert not (tmp_path / "none.db").exists()


@pytest.mark.parametrize("shape, attr, needle", [
    ("m=1,n=64", [], "needs dims"),
    ("m=1,n=x,k=4", [], "dims are integers"),
    ("m=1,n", [], "not key=value"),
    ("m=1,n=64,k=64", ["--attr", "epilogue"], "not key=value"),
])
def test_malformed_workload_exits_2(db, shape, attr, needle, capsys):
    assert main(_lookup(db, shape, *attr)) == 2
    err = capsys.readouterr().err
    assert needle in err and len(err.strip().splitlines()) == 1


def test_attributes_are_part_of_the_workload(db, capsys):
    assert main(_lookup(db, "m=1,n=64,k=64", "--attr", "bias=1", "--json")) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["workload"].endswith(":bias=1") and d["kind"] == "default"


def test_stale_records_are_never_exact_and_are_reported(tmp_path, fakes, capsys):  # noqa: F811
    """After a simulator change, old records neither answer exactly nor as nearest."""
    hw, low = load_hardware("hbm-pim"), FakeLowering()
    path = tmp_path / "old.db"
    d = open_database(path)
    for w in (W, Workload.make("gemv", m=1, n=96, k=64)):
        s = Schedule.of(low.space(w, hw), {"p": 3})
        d.commit(Measurement(w, s, hw.fingerprint, hw.name, "0.9", fake_latency(w, 3), 1.0))
    assert main(_lookup(path, "m=1,n=64,k=64", "--json")) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["kind"] == "default" and got["schedule"]["params"] == {"p": 1}
    assert got["stale"] == [{"space_version": 1, "sim_version": "0.9", "records": 1}]
    assert main(_lookup(path, "m=1,n=64,k=64")) == 0
    out = capsys.readouterr().out
    assert "1 stale record(s)" in out and "simulator 0.9" in out


def test_repeated_keys_are_refused(db, capsys):
    assert main(_lookup(db, "m=1,n=64,k=64,k=3")) == 2
    assert "--shape names 'k' twice" in capsys.readouterr().err
    assert main(_lookup(db, "m=1,n=64,k=64", "--attr", "fn=a", "--attr", "fn=b")) == 2
    assert "--attr names 'fn' twice" in capsys.readouterr().err
