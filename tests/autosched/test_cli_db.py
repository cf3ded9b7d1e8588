"""``autosched db list / export``, and a corrupt database file through any command."""

from __future__ import annotations

import importlib.util

import pandas as pd
import pytest
from test_cli_lookup import W, db  # noqa: F401  (fixture)
from test_tune import FakeLowering, fakes  # noqa: F401  (fixture)

from autosched.cli import main
from autosched.database import open_database
from autosched.measure.record import Measurement
from search_spaces import Schedule, Workload
from sim import SIM_VERSION
from sim.hwio import load_hardware


@pytest.fixture
def db2(db):  # noqa: F811
    """``db`` plus a failure on W and an rmsnorm measurement on aim-gddr6."""
    d, low = open_database(db), FakeLowering()
    hw, aim = load_hardware("hbm-pim"), load_hardware("aim-gddr6")
    d.commit(Measurement.failed(W, Schedule.of(low.space(W, hw), {"p": 2}), hw.fingerprint,
                                hw.name, SIM_VERSION, "does not fit"))
    r = Workload.make("rmsnorm", m=1, n=64)
    d.commit(Measurement(r, Schedule.of(low.space(r, aim), {"p": 1}), aim.fingerprint,
                         aim.name, SIM_VERSION, 50.0, 1.0))
    return db


def test_list_one_row_per_workload_and_hardware(db2, capsys):
    assert main(["db", "list", "--db", str(db2)]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].split() == ["workload", "hw_name", "best_ns", "bound_ns", "count",
                                "failures"]
    row = next(ln for ln in lines if W.key in ln).split()
    assert row[1] == "hbm-pim" and float(row[2]) == 4300.0 and row[4:] == ["3", "1"]
    assert len(lines) == 3


def test_list_filters_by_op_and_hardware(db2, capsys):
    assert main(["db", "list", "--db", str(db2), "--op", "rmsnorm"]) == 0
    out = capsys.readouterr().out
    assert "rmsnorm" in out and W.key not in out
    assert main(["db", "list", "--db", str(db2), "--hw", "aim-gddr6", "--op", "gemv"]) == 0
    assert "no measurements" in capsys.readouterr().out


def test_export_csv_round_trips_every_record(db2, tmp_path, capsys):
    out = tmp_path / "all.csv"
    assert main(["db", "export", "--csv", "--db", str(db2), "-o", str(out)]) == 0
    df = pd.read_csv(out, keep_default_na=False)
    assert len(df) == 4 and set(df["workload"]) == {W.key, "rmsnorm:m=1,n=64:fp16"}
    failed = df[df["error"] != ""]
    assert list(failed["error"]) == ["does not fit"] and failed["latency_ns"].iloc[0] == ""
    assert "4 measurement(s)" in capsys.readouterr().out


def test_export_parquet_needs_pyarrow(db2, tmp_path, capsys):
    out = tmp_path / "all.parquet"
    code = main(["db", "export", "--db", str(db2), "-o", str(out)])
    if importlib.util.find_spec("pyarrow") or importlib.util.find_spec("fastparquet"):
        assert code == 0 and len(pd.read_parquet(out)) == 4
    else:
        assert code == 2 and "pip install pyarrow" in capsys.readouterr().err
        assert not out.exists()


@pytest.mark.parametrize("argv", [["db", "list"], ["db", "export", "-o", "x.csv"],
                                  ["lookup", "--op", "gemv", "--shape", "m=1,n=8,k=8"],
                                  ["tune", "--model", "llama-tiny"]])
def test_corrupt_database_is_one_line_and_exit_2(argv, tmp_path, fakes, capsys):  # noqa: F811
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"this is not an sqlite file" * 100)
    argv = [a if a != "x.csv" else str(tmp_path / "x.csv") for a in argv]
    assert main([*argv, "--db", str(bad)]) == 2
    err = capsys.readouterr().err
    assert str(bad) in err and len(err.strip().splitlines()) == 1


def test_missing_database_is_an_error_for_db_commands(tmp_path, capsys):
    assert main(["db", "list", "--db", str(tmp_path / "none.db")]) == 2
    assert "no database at" in capsys.readouterr().err
    assert not (tmp_path / "none.db").exists()


def _one_line_exit_2(argv, capsys) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    return err


def test_export_never_overwrites_a_database(db2, tmp_path, capsys):
    err = _one_line_exit_2(["db", "export", "--db", str(db2), "-o", str(db2), "--force"], capsys)
    assert "is the database itself" in err
    other = tmp_path / "other.db"
    open_database(other).close()
    err = _one_line_exit_2(["db", "export", "--db", str(db2), "-o", str(other), "--force"],
                           capsys)
    assert "never overwrites" in err
    assert len(open_database(db2)) == 4 and len(open_database(other)) == 0


def test_export_refuses_an_existing_file_unless_forced(db2, tmp_path, capsys):
    out = tmp_path / "x.csv"
    out.write_text("keep me")
    err = _one_line_exit_2(["db", "export", "--db", str(db2), "-o", str(out)], capsys)
    assert "exists; pass --force" in err and out.read_text() == "keep me"
    assert main(["db", "export", "--db", str(db2), "-o", str(out), "--force"]) == 0
    assert len(pd.read_csv(out)) == 4
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".x.csv")] == []


def test_export_into_a_missing_folder(db2, tmp_path, capsys):
    err = _one_line_exit_2(["db", "export", "--db", str(db2), "-o",
                            str(tmp_path / "no" / "x.csv")], capsys)
    assert "does not exist" in err


def test_a_foreign_sqlite_file_is_refused_untouched(tmp_path, fakes, capsys):  # noqa: F811
    import sqlite3

    foreign = tmp_path / "shop.db"
    with sqlite3.connect(foreign) as c:
        c.execute("CREATE TABLE customers (id INTEGER)")
    before = foreign.read_bytes()
    for argv in (["db", "list"], ["lookup", "--op", "gemv", "--shape", "m=1,n=8,k=8"],
                 ["tune", "--model", "llama-tiny"]):
        err = _one_line_exit_2([*argv, "--db", str(foreign)], capsys)
        assert "belongs to another application" in err
    assert foreign.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["shop.db"]


@pytest.mark.parametrize("url, needle", [
    ("postgresql+psycopg://u:secret@localhost:notaport/x", "not a valid database URL"),
    ("postgresql://u:secret@127.0.0.1:1/x", "cannot use the database server"),
    ("nosuchdb://x/y", "no usable driver"),
])
def test_bad_database_urls_are_one_line(url, needle, capsys):
    err = _one_line_exit_2(["db", "list", "--db", url], capsys)
    assert needle in err and "secret" not in err


def test_a_missing_postgres_driver_names_the_extra(monkeypatch, capsys):
    import autosched.database.engine as engine

    real = engine.importlib.util.find_spec
    monkeypatch.setattr(engine.importlib.util, "find_spec",
                        lambda name, *a: None if name == "psycopg" else real(name, *a))
    err = _one_line_exit_2(["db", "list", "--db", "postgresql://u@localhost/x"], capsys)
    assert "pip install 'autosched[postgres]'" in err


def test_check_finds_a_sound_database_and_a_tampered_one(db2, capsys):
    assert main(["db", "check", "--db", str(db2)]) == 0
    assert capsys.readouterr().out.strip().endswith("4 measurement(s), ok")
    import sqlite3

    with sqlite3.connect(db2) as c:  # lose a record behind the summary's back
        c.execute("DELETE FROM measurements WHERE id = (SELECT min(id) FROM measurements)")
    assert main(["db", "check", "--db", str(db2)]) == 1
    out = capsys.readouterr().out
    assert "disagrees" in out and "1 problem(s)" in out
