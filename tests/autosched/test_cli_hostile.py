"""Hostile and careless command lines (issue 29): outputs that are devices or symlinks,
JSON nested 100,000 deep, numbers no run could have, the small lies. Each is refused with
one line and exit status 2 before any work, and nothing stored changes."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_cli_tune import tiny_config  # noqa: F401  (fixture)
from test_tune import fakes  # noqa: F401  (fixture)

from autosched.cli import main
from autosched.database import open_database

REPO = Path(__file__).resolve().parents[2]
DEEP = "[" * 100_000 + "]" * 100_000


def _code(argv) -> int:
    try:
        return main(argv)
    except SystemExit as e:  # argparse's own errors
        return int(e.code)


def _refused(argv, capsys) -> str:
    assert _code(argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    return err


def _cli(*argv: str, timeout: float = 60, **kw) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "autosched", *argv],
                          stdout=kw.pop("stdout", subprocess.PIPE), stderr=subprocess.PIPE,
                          text=True, timeout=timeout, env=env, **kw)


# 1. output paths --------------------------------------------------------------------------

def test_compile_never_replaces_a_fifo_or_writes_through_a_symlink(tiny_config, tmp_path,  # noqa: F811
                                                                   capsys):
    fifo, target, link = tmp_path / "out.fifo", tmp_path / "kept.s", tmp_path / "link.s"
    os.mkfifo(fifo)
    target.write_text("kept")
    link.symlink_to(target)
    common = ["compile", "--model", str(tiny_config), "--db", "none", "--context", "8"]
    assert "is a FIFO" in _refused([*common, "-o", str(fifo)], capsys)
    err = _refused([*common, "-o", str(tmp_path / "p.json"), "--asm", str(link)], capsys)
    assert "is a symlink" in err
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and link.is_symlink()
    assert target.read_text() == "kept" and not (tmp_path / "p.json").exists()


def test_a_rewritten_program_keeps_its_mode(tiny_config, tmp_path, capsys):  # noqa: F811
    out = tmp_path / "p.json"
    out.write_text("old")
    out.chmod(0o644)
    assert main(["compile", "--model", str(tiny_config), "--db", "none", "--context", "8",
                 "-o", str(out)]) == 0
    assert json.loads(out.read_text()) and stat.S_IMODE(out.stat().st_mode) == 0o644


def test_tune_report_and_db_export_never_write_through_a_symlink(fakes, tiny_config,  # noqa: F811
                                                                 tmp_path, capsys):
    target, link = tmp_path / "kept.json", tmp_path / "link.json"
    target.write_text("kept")
    link.symlink_to(target)
    db = tmp_path / "t.db"
    err = _refused(["tune", "--model", str(tiny_config), "--db", str(db), "--trials", "2",
                    "--report", str(link)], capsys)
    assert "is a symlink" in err and not db.exists()
    open_database(db).close()
    err = _refused(["db", "export", "--db", str(db), "--force", "-o", str(link)], capsys)
    assert "is a symlink" in err and link.is_symlink() and target.read_text() == "kept"


# 4. JSON nested 100,000 deep --------------------------------------------------------------

def test_json_nested_100000_deep_is_one_line_everywhere(tiny_config, tmp_path, capsys):  # noqa: F811
    deep = tmp_path / "deep.json"
    deep.write_text(DEEP)
    db = tmp_path / "t.db"
    for argv, needle in (
            (["tune", "--model", str(deep), "--db", str(db)], "nested deeper than 64 levels"),
            (["tune", "--model", str(tiny_config), "--db", str(db), "--cost-model", str(deep)],
             "is not a saved cost model"),
            (["kernels", "--model", str(tiny_config), "--tuned", str(deep)],
             "nested deeper than 64 levels"),
            (["simulate", "--model", str(deep), "--db", "none"], "nested deeper than 64")):
        assert needle in _refused(argv, capsys)
    assert not db.exists()


# 7. numbers -------------------------------------------------------------------------------

@pytest.mark.parametrize("flags, needle", [
    (["--workers", "1000000000000"], "--workers must be <= 1,024"),
    (["--timeout", "1000000000000"], "--timeout must be <= 86,400"),
    (["--timeout", "nan"], "--timeout must be a finite number"),
    (["--seed", "-1"], "--seed must be >= 0"),
    (["--seed", str(2**40)], "--seed must be <= 4,294,967,295"),
    (["--batch", "1000000000000"], "--batch must be <= 4,096"),
    (["--context", "0"], "--context must be >= 1"),
])
def test_tune_numbers_are_bounded_at_parse_time(flags, needle, tiny_config, tmp_path,  # noqa: F811
                                                capsys):
    db = tmp_path / "t.db"
    t0 = time.monotonic()
    err = _refused(["tune", "--model", str(tiny_config), "--db", str(db), "--trials", "1",
                    *flags], capsys)
    assert needle in err and "allowed:" in err and not db.exists()
    assert time.monotonic() - t0 < 5


@pytest.mark.parametrize("argv", [
    ["simulate", "--model", "llama-tiny", "--db", "none", "--batch", "1000000000000"],
    ["sim", "gemv", "--out", "64", "--in", "64", "--batch", "1000000000000"],
    ["tune", "--model", "llama-tiny", "--db", "{db}", "--trials", "1000000000000"],
    ["run", "--model", "llama-tiny", "--db", "none", "--steps", "1000000000000"],
], ids=["simulate", "sim-gemv", "tune-trials", "run-steps"])
def test_numbers_that_used_to_hang_are_refused_at_once(argv, tmp_path):
    res = _cli(*[a.format(db=tmp_path / "t.db") for a in argv], timeout=60)
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert "must be <=" in res.stderr and not (tmp_path / "t.db").exists()


def test_rope_scaling_factor_nan_or_negative_is_refused(tiny_config, tmp_path, capsys):  # noqa: F811
    hf = json.loads(tiny_config.read_text())
    neg = tmp_path / "neg.json"
    neg.write_text(json.dumps({**hf, "rope_scaling": {"rope_type": "linear", "factor": -2.0}}))
    nan = tmp_path / "nan.json"
    nan.write_text(json.dumps({**hf, "rope_scaling": {"rope_type": "linear",
                                                      "factor": float("nan")}}))
    err = _refused(["run", "--model", str(neg), "--check", "--steps", "2"], capsys)
    assert "rope_scaling.factor must be a number in (0, 1024], got -2.0" in err
    assert "NaN is not a JSON number" in _refused(["run", "--model", str(nan), "--check",
                                                   "--steps", "2"], capsys)


# 8. small lies and leftovers --------------------------------------------------------------

def test_an_in_memory_database_url_is_refused_at_once(tiny_config, capsys):  # noqa: F811
    t0 = time.monotonic()
    err = _refused(["tune", "--model", str(tiny_config), "--db", "sqlite://", "--trials", "1"],
                   capsys)
    assert "in-memory database" in err and "full disk" not in err
    assert time.monotonic() - t0 < 5


def test_a_closed_pipe_ends_quietly(tmp_path):
    r, w = os.pipe()
    os.close(r)  # the reader is gone before anything is written: every write fails
    try:
        res = _cli("lookup", "--op", "gemv", "--shape", "m=1,n=64,k=64", "--db",
                   str(tmp_path / "none.db"), stdout=w)
    finally:
        os.close(w)
    assert res.returncode in (0, 141) and res.stderr == ""


def test_a_refused_tune_creates_no_database(tiny_config, tmp_path, capsys):  # noqa: F811
    db = tmp_path / "t.db"
    err = _refused(["tune", "--model", str(tiny_config), "--db", str(db), "--cost-model",
                    str(tmp_path / "missing.ubj")], capsys)
    assert "no cost model file" in err and not db.exists()


def test_reading_commands_never_write_a_schema_into_an_empty_file(tmp_path, capsys):
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    for argv in (["db", "list"], ["db", "check"], ["lookup", "--op", "gemv", "--shape",
                                                   "m=1,n=64,k=64"]):
        assert "is an empty file" in _refused([*argv, "--db", str(empty)], capsys)
    assert empty.read_bytes() == b"" and sorted(p.name for p in tmp_path.iterdir()) == \
        ["empty.db"]


def test_a_database_folder_is_one_error_everywhere(tiny_config, tmp_path, capsys):  # noqa: F811
    folder = tmp_path / "dbs"
    folder.mkdir()
    want = f"--db {folder} is a folder; name a database file"
    for argv in (["lookup", "--op", "gemv", "--shape", "m=1,n=64,k=64"], ["db", "list"],
                 ["tune", "--model", str(tiny_config)],
                 ["simulate", "--model", str(tiny_config)]):
        assert want in _refused([*argv, "--db", str(folder)], capsys)
    assert list(folder.iterdir()) == []


@pytest.mark.parametrize("argv, needle", [
    (["--op", "gemv", "--shape", "m=1,n=64,k=64", "--dtype", "int3"], "invalid choice: 'int3'"),
    (["--op", "attention", "--shape", "b=1,q=1,h=4,kvh=2,d=33,l=16"], "d=33"),
])
def test_lookup_refuses_workloads_no_model_has(argv, needle, tmp_path, capsys):
    assert needle in _refused(["lookup", *argv, "--db", str(tmp_path / "none.db")], capsys)


def test_kernels_checks_its_schedule_source_before_any_work(tiny_config, tmp_path,  # noqa: F811
                                                            capsys):
    bad = tmp_path / "export.json"
    bad.write_text('{"format": 1, "hardware": {}}')
    for flag in ("--tuned", "--db"):
        t0 = time.monotonic()
        err = _refused(["kernels", "--model", "llama-tiny", flag, str(bad)], capsys)
        assert "no schedule on hbm-pim" in err and time.monotonic() - t0 < 20


def test_kernels_needs_no_database(tiny_config, tmp_path, monkeypatch, capsys):  # noqa: F811
    monkeypatch.chdir(tmp_path)  # no autosched.db here
    assert main(["kernels", "--model", str(tiny_config), "--context", "8", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["schedules_from"].startswith("the default schedules")
    assert all(o["found"] == "default" for o in out["ops"])
    assert [p.name for p in tmp_path.iterdir()] == ["config.json"]


def test_the_tune_report_lists_each_workload_once(fakes, tiny_config, tmp_path,  # noqa: F811
                                                  capsys):
    rep = tmp_path / "r.json"
    assert main(["tune", "--model", str(tiny_config), "--db", str(tmp_path / "t.db"),
                 "--batch", "8", "--trials", "4", "--report", str(rep)]) == 0
    rows = [ln.split()[0] for ln in capsys.readouterr().out.splitlines()
            if ln.split() and ":" in ln.split()[0] and "=" in ln.split()[0]]
    keys = [t["workload"] for t in json.loads(rep.read_text())["tasks"]]
    assert keys and len(set(keys)) == len(keys) and sorted(rows) == sorted(keys)
