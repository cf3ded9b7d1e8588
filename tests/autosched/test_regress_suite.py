"""``autosched regress --suite quick``: the tree passes its checked-in baseline, and a
lowering slowed by one extra row activation per tile fails it, naming that operator."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

import autosched.families.gemv.lowering as gemv_lowering
from autosched.cli import main
from autosched.regress.baseline import baseline_path
from sim.isa import Act, Pre, WrGb, aff
from sim.program import Loop

QUICK = ["regress", "--suite", "quick", "--repeats", "1", "--quiet"]


def _extra_activation(body: tuple, bpu: int) -> tuple:
    """``body`` with one more activate + precharge after each global-buffer tile write."""
    out: list = []
    for node in body:
        if isinstance(node, Loop) and not all(isinstance(n, WrGb) for n in node.body):
            out.append(Loop(node.var, node.count, _extra_activation(node.body, bpu)))
            continue
        out.append(node)
        if isinstance(node, WrGb | Loop):
            # the last bank of each unit: the pipelined row walk keeps bank 0's next row
            # open across a tile's broadcast
            out += [Act(bpu - 1, bpu, aff(0)), Pre(bpu - 1, bpu)]
    return tuple(out)


@pytest.fixture()
def slowed_gemv(monkeypatch: pytest.MonkeyPatch) -> None:
    """The gemv lowering, every PIM tile paying one more row activation."""
    real = gemv_lowering.gemv

    def slowed(hw, *args, **kwargs):
        k = real(hw, *args, **kwargs)
        streams = tuple(replace(s, body=_extra_activation(s.body, hw.pim.banks_per_unit))
                        if s.engine == "pim" else s for s in k.program.streams)
        return replace(k, program=replace(k.program, streams=streams))

    monkeypatch.setattr(gemv_lowering, "gemv", slowed)


def test_quick_suite_passes_on_this_tree(tmp_path: Path, capsys) -> None:
    assert main([*QUICK, "--history", str(tmp_path / "h.jsonl")]) == 0, capsys.readouterr().err
    entry = json.loads((tmp_path / "h.jsonl").read_text())
    assert entry["verdict"] == "pass" and len(entry["cases"]) >= 16


def test_an_extra_row_activation_per_tile_fails_naming_the_operator(
        tmp_path: Path, capsys, slowed_gemv: None) -> None:
    assert main([*QUICK, "--no-history", "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    failing = [c for c in out["cases"] if c["verdict"] != "ok"]
    model_cases = [c for c in out["cases"] if not c["case"].startswith(("gemv-library", "tune/"))]
    assert failing and all(c["verdict"] == "regressed" for c in failing)
    assert {c["case"] for c in failing} == {c["case"] for c in model_cases}
    moved = {ch["op"] for c in failing for ch in c["changes"] if ch["op"]}
    assert moved and all(op.split(":")[0] in ("gemv", "gemm") for op in moved)  # its families
    capsys.readouterr()
    assert main([*QUICK, "--no-history", "--cases", "llama-tiny/hbm-pim/decode-*/default"]) == 1
    err = capsys.readouterr().err
    assert "regressed" in err and "q_proj/o_proj gemv:m=1,n=256,k=256:fp16: latency +" in err
    assert "attn attention" not in err and "rmsnorm" not in err


def test_update_records_the_reason_and_then_passes(tmp_path: Path, capsys,
                                                   slowed_gemv: None) -> None:
    base = tmp_path / "b.json"
    shutil.copy(baseline_path("quick"), base)
    args = [*QUICK, "--baseline", str(base), "--history", str(tmp_path / "h.jsonl"),
            "--cases", "odd-qwen2/aim-gddr6/decode-*/default"]
    assert main([*args, "--update"]) == 2
    assert "--reason" in capsys.readouterr().err
    assert main([*args, "--update", "--reason", "one more activation per tile"]) == 0
    log = json.loads(base.read_text())["updates"][-1]
    assert log["reason"] == "one more activation per tile"
    assert log["changed"] == ["odd-qwen2/aim-gddr6/decode-b1-c128/default"]
    assert main(args) == 0
    verdicts = [json.loads(line)["verdict"] for line in (tmp_path / "h.jsonl").open()]
    assert verdicts == ["update", "pass"]


def test_bad_input_exits_2_with_one_line(tmp_path: Path, capsys) -> None:
    assert main([*QUICK, "--baseline", str(tmp_path / "none.json"), "--no-history"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "no baseline" in err
    assert main([*QUICK, "--cases", "nothing/*", "--no-history"]) == 2
