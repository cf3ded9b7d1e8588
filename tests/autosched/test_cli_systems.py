"""``compile``/``simulate``/``run`` on a system of several devices, and the memory budget
every one of them prints."""

from __future__ import annotations

import json

import pytest
import yaml

from autosched.cli import main


@pytest.fixture(scope="module")
def quad(tmp_path_factory) -> str:
    p = tmp_path_factory.mktemp("sys") / "quad.yaml"
    p.write_text(yaml.safe_dump({"name": "quad", "device": "hbm-pim", "devices": 4,
                                 "link": {"bandwidth_gbps": 64.0, "latency_ns": 500.0,
                                          "topology": "switch"}}))
    return str(p)


def test_simulate_prints_budget_and_largest_batch(capsys) -> None:
    assert main(["simulate", "--model", "llama-tiny", "--context", "32"]) == 0
    out = capsys.readouterr().out
    for label in ("weights", "kv_cache", "activations", "free", "max_batch at context 32"):
        assert label in out
    line = next(x for x in out.splitlines() if x.startswith("max_batch"))
    assert int(line.split()[-1].replace(",", "")) > 1


@pytest.mark.parametrize("arg, match", [
    ("2by2", "write devices per stage x stages"),
    ("3x1", "tp=3"),
    ("1x9", "pp=9 must be in [1, 4]"),
    ("4x2", "needs 8 devices, quad has 4"),
])
def test_bad_partition_is_one_line_exit_2(quad, capsys, arg, match) -> None:
    assert main(["simulate", "--model", "llama-tiny", "--hw", quad, "--partition", arg]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and match in err


def test_system_simulate_and_run_check(quad, tmp_path, capsys) -> None:
    assert main(["simulate", "--model", "llama-tiny", "--hw", quad, "--context", "16",
                 "--partition", "2x2", "--json"]) == 0
    f = json.loads(capsys.readouterr().out)
    assert f["partition"]["tp"] == 2 and f["partition"]["pp"] == 2
    assert f["latency_ns"] >= f["bound_ns"] > 0
    assert 0 < f["comm_share"] < 1 and f["link_bytes"] > 0
    assert main(["compile", "--model", "llama-tiny", "--hw", quad, "--partition", "2x2",
                 "-o", str(tmp_path / "p.json")]) == 0
    out = capsys.readouterr().out
    assert "[stage 1:" in out and "free" in out
    assert main(["run", "--model", "llama-tiny", "--hw", quad, "--partition", "2x2",
                 "--check", "--steps", "2", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["passed"]


def test_a_device_whose_cache_overflows_takes_denser_layouts_as_one_device_does() -> None:
    """Two devices of 36 rows per bank, llama-tiny at batch 16 and context 512: under tp=2
    and under pp=2 each device's KV cache fits only in denser attention layouts; every
    stage compiles with them (as a single device's plan does) and the step simulates,
    where it used to be refused."""
    from autosched.api import compile_model
    from autosched.compiler.partition import Partition
    from sim.hwio import load_hardware
    from sim.system import load_system
    from sim.timing import simulate_system

    dev = load_hardware("hbm-pim").to_dict()
    dev["name"], dev["org"]["rows_per_bank"] = "hbm-pim-36rows", 36
    system = load_system({"name": "duo", "device": dev, "devices": 2,
                          "link": {"bandwidth_gbps": 64.0, "latency_ns": 500.0,
                                   "topology": "switch"}})
    for part in (Partition.even(2, 1, 4), Partition.even(1, 2, 4)):  # tp=2; pp=2 (stages)
        cs = compile_model("llama-tiny", system, partition=part, batch=16, context=512)
        for stage in cs.stages:
            assert stage.budget.fits
            attn = [c.kind for n, c in stage.choices.items() if n.endswith(".attn")]
            assert attn and set(attn) == {"fitted"}
        assert simulate_system(cs.program, system).latency_ns > 0


@pytest.mark.parametrize("partition", [(1, 2), (2, 1)], ids=["pp2", "tp2"])
def test_the_full_fusion_plan_runs_over_stages_and_shards(quad, partition) -> None:
    """Over pipeline stages the embedding's norm and the LM head's argmax stay fused (on
    the first and last stage); over tensor-parallel shards the argmax is left unfused
    (each shard holds a slice of the vocabulary), and both check against torch."""
    from autosched.api import run_check
    from autosched.compiler import partition_graph
    from autosched.compiler.partition import Partition
    from autosched.pipeline import step_of
    from search_spaces.fusion import FULL_FUSION

    tp, pp = partition
    part = Partition.even(tp, pp, 4)
    graph = partition_graph(step_of("llama-tiny", context=8), part, FULL_FUSION)
    head = graph.node("lm_head").workload.attr("epilogue")
    assert head == ("argmax" if tp == 1 else None)
    assert graph.node("embed").workload.attr("epilogue") == ("rmsnorm" if tp == 1 else None)
    rep = run_check("llama-tiny", quad, partition=part, steps=3, fusion=FULL_FUSION)
    assert rep.passed, rep
