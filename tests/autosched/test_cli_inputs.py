"""Bad command-line input: one line, exit 2, before any work, nothing lost (the search and
compiler are the doubles of test_tune.py)."""

from __future__ import annotations

import json

import pytest
import yaml
from test_cli_tune import tiny_config  # noqa: F401  (fixture)
from test_tune import fakes  # noqa: F401  (fixture)

from autosched.cli import main
from autosched.database import open_database
from sim.hwio import load_hardware


def _refused(argv, capsys) -> str:
    try:
        code = main(argv)
    except SystemExit as e:  # argparse's own errors
        code = e.code
    assert code == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    return err


@pytest.mark.parametrize("flags, needle", [
    (["--context", "0"], "--context must be >= 1, got 0"),
    (["--workers", "0"], "--workers must be >= 1, got 0"),
    (["--batch", "-2"], "--batch must be >= 1"),
    (["--trials", "-1"], "--trials must be >= 0"),
    (["--timeout", "0"], "--timeout must be > 0"),
    (["--context", "many"], "invalid int value: 'many'"),
    (["--runner", "dask://somewhere"], "is not 'local' or dask://HOST:PORT"),
    (["--runner", "dask://127.0.0.1:8786", "--workers", "2"], "--workers sizes the local"),
    (["--report", "/no/such/folder/r.json"], "folder /no/such/folder does not exist"),
])
def test_bad_tune_flags_are_refused_before_any_work(flags, needle, fakes, tiny_config,  # noqa: F811
                                                    tmp_path, capsys):
    db = tmp_path / "t.db"
    err = _refused(["tune", "--model", str(tiny_config), "--db", str(db), *flags], capsys)
    assert needle in err and not db.exists()


def test_a_capped_context_is_reported(fakes, tiny_config, tmp_path, capsys):  # noqa: F811
    rep = tmp_path / "r.json"
    assert main(["tune", "--model", str(tiny_config), "--db", str(tmp_path / "t.db"),
                 "--context", "1000000", "--trials", "2", "--report", str(rep)]) == 0
    assert "--context 1000000 is capped to 256" in capsys.readouterr().err
    assert json.loads(rep.read_text())["context"] == 256


def test_the_report_never_overwrites_a_database_and_replaces_a_report_whole(
        fakes, tiny_config, tmp_path, capsys):  # noqa: F811
    db = tmp_path / "t.db"
    open_database(db).close()
    before = db.read_bytes()
    err = _refused(["tune", "--model", str(tiny_config), "--db", str(db), "--report", str(db)],
                   capsys)
    assert "is a database" in err and db.read_bytes() == before
    rep = tmp_path / "r.json"
    rep.write_text("old")
    assert main(["tune", "--model", str(tiny_config), "--db", str(db), "--trials", "3",
                 "--report", str(rep)]) == 0
    assert json.loads(rep.read_text())["measurements"] == 3
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temp left


def test_a_huge_hardware_file_is_one_line_everywhere(tmp_path, capsys):
    d = load_hardware("hbm-pim").to_dict()
    d["org"]["channels"] = 1_000_000_000_000
    hw = tmp_path / "big.yaml"
    hw.write_text(yaml.safe_dump(d))
    for argv in (["hw", "show", str(hw)], ["sim", "gemv", "--out", "64", "--in", "64",
                                           "--hw", str(hw)]):
        assert "'org.channels' must be <= 1,024" in _refused(argv, capsys)
    fat = tmp_path / "fat.yaml"
    fat.write_text("name: x\n" + "# padding\n" * 200_000)
    assert "not parsed" in _refused(["hw", "show", str(fat)], capsys)
