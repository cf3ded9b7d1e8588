"""After ``tune``, ``compile``, ``simulate`` and ``run`` use its database by default and
say which schedule each operator got; after a simulator change nothing is "exact"."""

from __future__ import annotations

import json

import pytest

import sim
from autosched.cli import main
from experiments.scenarios import write_config


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    """A folder holding a one-layer model's config.json and the autosched.db tune wrote
    (the unfused graph alone; the defaults of so small a model are its best, so tune
    stores the default step's plan, and ``--placement auto`` asks for the database's
    schedules, every one of them measured)."""
    folder = tmp_path_factory.mktemp("tuned")
    config = write_config(folder)
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(folder)
        assert main(["tune", "--model", str(config), "--context", "16", "--trials", "24",
                     "--workers", "1", "--cost-model", "none", "--fusion", "none",
                     "--quiet"]) == 0
    return folder, config


def test_simulate_uses_the_tuned_schedules_and_says_so(tuned, monkeypatch, capsys):
    folder, config = tuned
    monkeypatch.chdir(folder)
    capsys.readouterr()
    assert main(["simulate", "--model", str(config), "--context", "16"]) == 0
    head = capsys.readouterr().out.splitlines()[0]  # tune found the default step fastest
    assert head.startswith("schedules from autosched.db: ") and head.endswith(" default")
    assert main(["simulate", "--model", str(config), "--context", "16", "--placement",
                 "auto"]) == 0
    head = capsys.readouterr().out.splitlines()[0]
    assert head.startswith("schedules from autosched.db: ") and " exact" in head
    assert main(["simulate", "--model", str(config), "--context", "16", "--db", "none",
                 "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert set(d["lookups"]) == {"default"} and d["schedules_from"].startswith("no database")


def test_compile_and_run_list_each_operator_s_schedule(tuned, monkeypatch, capsys):
    folder, config = tuned
    monkeypatch.chdir(folder)
    assert main(["compile", "--model", str(config), "--context", "16", "-o", "p.json",
                 "--placement", "auto"]) == 0
    out = capsys.readouterr().out
    assert "schedules from autosched.db" in out and "  exact    gemv:" in out
    assert (folder / "p.json").exists()
    assert main(["run", "--model", str(config), "--check", "--steps", "2"]) == 0
    out = capsys.readouterr().out
    assert "schedules from autosched.db" in out and "PASS" in out


def test_after_a_simulator_change_nothing_is_exact(tuned, monkeypatch, capsys):
    folder, config = tuned
    monkeypatch.chdir(folder)
    orig = sim.SIM_VERSION
    monkeypatch.setattr(sim, "SIM_VERSION", "99.0")
    capsys.readouterr()
    assert main(["lookup", "--op", "gemv", "--shape", "m=1,n=64,k=64", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["kind"] == "default" and d["stale"][0]["sim_version"] == orig
    assert main(["simulate", "--model", str(config), "--context", "16"]) == 0
    head = capsys.readouterr().out.splitlines()[0]
    assert "exact" not in head and "nearest" not in head


def test_a_step_between_tuned_buckets_takes_the_nearest_bucket_s_plans(tuned, monkeypatch,
                                                                        capsys):
    """Tuned at context 16 only: a step at context 24 (or batch 2) takes that bucket's
    fusion and placement plans and ``simulate``, ``compile`` and ``run`` say so."""
    folder, config = tuned
    monkeypatch.chdir(folder)
    capsys.readouterr()
    assert main(["simulate", "--model", str(config), "--context", "24"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1] == ("plans of the nearest tuned bucket, decode batch 1 context 16 "
                        "(decode batch 1 context 24 has none of its own)")
    assert main(["simulate", "--model", str(config), "--context", "16", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["plans_from"] == \
        "plans tuned for decode batch 1 context 16"
    assert main(["compile", "--model", str(config), "--context", "16", "--batch", "2",
                 "-o", "p2.json"]) == 0
    assert "plans of the nearest tuned bucket, decode batch 1 context 16 (decode batch 2 " \
        "context 16 has none of its own)" in capsys.readouterr().out
    assert main(["run", "--model", str(config), "--steps", "2", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["plans_from"].startswith(
        "plans of the nearest tuned bucket, decode batch 1 context 16")
    assert main(["simulate", "--model", str(config), "--context", "24", "--phase", "prefill",
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["plans_from"] == \
        "no tuned plans for this model and phase"
