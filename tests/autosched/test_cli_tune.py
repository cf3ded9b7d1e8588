"""``autosched tune`` end to end through the CLI: doubles for search and compiler (see
test_tune.py), and the real pipeline on a one-layer model when it is installed."""

from __future__ import annotations

import functools
import json

import pytest
from test_tune import TINY, fake_tune_tasks, fakes  # noqa: F401  (fixture)

from autosched.cli import main
from autosched.database import open_database


@pytest.fixture
def tiny_config(tmp_path):
    """A Hugging Face config.json of a one-layer llama with hidden size 64."""
    p = tmp_path / "config.json"
    p.write_text(json.dumps({
        "model_type": "llama", "hidden_size": TINY.hidden, "intermediate_size": TINY.intermediate,
        "num_hidden_layers": 1, "num_attention_heads": TINY.heads,
        "num_key_value_heads": TINY.kv_heads, "vocab_size": TINY.vocab,
        "max_position_embeddings": TINY.max_positions, "torch_dtype": "float16"}))
    return p


def test_tune_prints_tables_and_writes_the_report(fakes, tiny_config, tmp_path,  # noqa: F811
                                                   capsys):
    db, rep = tmp_path / "t.db", tmp_path / "r.json"
    assert main(["tune", "--model", str(tiny_config), "--db", str(db), "--report", str(rep),
                 "--trials", "1000", "--cost-model", "none", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "tuned ns" in out and "tokens/s" in out and "0 reused" in out
    d = json.loads(rep.read_text())
    assert d["measurements"] == len(open_database(db)) > 0
    assert all(t["tuned_ns"] <= t["default_ns"] for t in d["tasks"])
    assert main(["tune", "--model", str(tiny_config), "--db", str(db), "--cost-model", "none",
                 "--quiet"]) == 0
    assert f"0 new measurement(s), {d['measurements']} reused" in capsys.readouterr().out


def test_ctrl_c_keeps_committed_measurements_and_exits_130(fakes, tiny_config,  # noqa: F811
                                                           tmp_path, capsys):
    fakes.tune_tasks = functools.partial(fake_tune_tasks, interrupt_after=3)
    db = tmp_path / "t.db"
    assert main(["tune", "--model", str(tiny_config), "--db", str(db), "--cost-model",
                 "none"]) == 130
    err = capsys.readouterr().err
    assert "3 measurement(s)" in err and "rerun" in err
    assert len(open_database(db)) == 3


def test_unknown_model_is_one_line_and_exit_2(tmp_path, capsys):
    assert main(["tune", "--model", "no-such-model", "--db", str(tmp_path / "t.db")]) == 2
    err = capsys.readouterr().err
    assert "unknown model 'no-such-model'" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("text", ["org: [1, 2\n", "name: x\norg: {channels: -3}\n"])
def test_malformed_hardware_file_exits_2_naming_it(text, tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    assert main(["tune", "--model", "llama-tiny", "--hw", str(bad), "--db",
                 str(tmp_path / "t.db")]) == 2
    assert "bad.yaml" in capsys.readouterr().err
    assert not (tmp_path / "t.db").exists()


def test_real_tune_resumes_without_repeating_a_measurement(tiny_config, tmp_path):
    db, rep = tmp_path / "t.db", tmp_path / "r.json"
    args = ["tune", "--model", str(tiny_config), "--db", str(db), "--context", "16",
            "--trials", "64", "--workers", "1", "--cost-model", "none", "--quiet"]
    assert main([*args, "--report", str(rep)]) == 0
    d = json.loads(rep.read_text())
    assert d["measurements"] > 0
    for t in d["tasks"]:  # the budget covers every task's default and then some
        assert t["measurements"] >= 1 and t["schedule"] is not None
        assert t["tuned_ns"] <= t["default_ns"]
        assert t["bound_ns"] <= t["tuned_ns"] * (1 + 1e-9)
    e = d["end_to_end"]
    assert e["tuned_ns"] <= e["default_ns"] * (1 + 1e-9) and e["bound_ns"] <= e["tuned_ns"]
    assert main([*args, "--report", str(rep)]) == 0
    assert json.loads(rep.read_text())["reused"] == d["measurements"]
    recs = open_database(db).records()
    keys = [(m.workload.key, m.schedule.key, m.hw_fingerprint) for m in recs]
    assert len(keys) == len(set(keys))
