"""``autosched kernels``: per operator, the library kernel against the compiler's default and
tuned schedules, which one the tuned program uses, and why."""

from __future__ import annotations

import json
from pathlib import Path

from autosched.cli import main
from autosched.pipeline import model_graph
from autosched.regress.handoff import compare_ops
from autosched.regress.results import CaseResult, OpFigures
from autosched.regress.tuned import TUNED_PATH
from sim.hwio import load_hardware

GEMV, ATTN = "gemv:m=1,n=256,k=256:fp16", "attention:b=1,q=1,h=8,kvh=4,d=32,l=128:fp16:capacity=128"


def _case(kind: str, gemv_ns: float, gemv_key: str) -> CaseResult:
    ops = (OpFigures(GEMV, ("q_proj", "o_proj"), 8, gemv_ns, 1.0, 200.0, gemv_key),
           OpFigures(ATTN, ("attn",), 4, 1500.0, 1.0, 210.0, "attention@v1:x"))
    return CaseResult(f"llama-tiny/hbm-pim/decode-b1-c128/{kind}", "model",
                      {"latency_ns": 1.0, "energy_pj": 1.0, "bound_ns": 1.0}, ops)


def test_each_verdict_of_the_handoff() -> None:
    hw = load_hardware("hbm-pim")
    graph = model_graph("llama-tiny", context=128)[1]
    lib, dflt = _case("library", 1494.0, "lib"), _case("default", 746.0, "dflt")

    def one(tuned_ns: float, key: str, found: str = "exact"):
        ops = compare_ops(graph, hw, lib, dflt, _case("tuned", tuned_ns, key),
                          {GEMV: found, ATTN: found})
        return {o.workload: o for o in ops}

    faster = one(598.0, "tuned")
    assert (faster[GEMV].uses, faster[GEMV].why) == ("tuned",
                                                    "2.50x faster than the library kernel")
    assert faster[ATTN].library_ns is None and "no library kernel for attention" in faster[ATTN].why
    assert one(1494.0, "lib")[GEMV].uses == "library"
    assert one(746.0, "dflt")[GEMV].uses == "default"
    slower = one(1600.0, "near", "nearest")[GEMV]
    assert "the library kernel is 1.07x faster" in slower.why and "nearest" in slower.why


def test_kernels_command_on_the_checked_in_export(capsys) -> None:
    assert main(["kernels", "--model", "llama-tiny", "--hw", "aim-gddr6", "--context", "128",
                 "--tuned", str(TUNED_PATH), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["slower_ops"] == 0 and out["speedup"] > 1.3
    lat = out["latency_ns"]
    assert lat["fused"] <= lat["tuned"] <= lat["default"] < lat["library"]
    lib = [o for o in out["ops"] if o["library_ns"] is not None]
    assert all(o["tuned_ns"] <= o["library_ns"] for o in lib)
    assert any(o["tuned_ns"] < o["library_ns"] for o in lib)
    # each operator uses the fastest of its library kernel, default and tuned schedule
    for o in lib:
        best = min(o["library_ns"], o["default_ns"], o["tuned_ns"])
        assert o["tuned_ns"] == best
        assert o["uses"] != "library" or o["library_ns"] == best
    assert all(o["library_ns"] is None for o in out["ops"] if o["workload"].startswith("attention"))
    assert out["kernel_speedup"] > 1.3 and out["library_error"] is None


def test_kernels_and_simulate_reject_bad_input_in_one_line(tmp_path: Path, capsys) -> None:
    assert main(["kernels", "--model", "llama-tiny", "--tuned", str(tmp_path / "x.db")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "no tuning database" in err
    assert main(["simulate", "--model", "llama-tiny", "--schedules", "library", "--json",
                 "--context", "16"]) == 0
    fig = json.loads(capsys.readouterr().out)
    assert fig["lookups"]["library"] > 0 and fig["lookups"]["default"] > 0


def test_kernels_of_a_model_quantized_on_the_fly(capsys) -> None:
    argv = ["kernels", "--model", "llama-tiny", "--hw", "hbm-pim-int8", "--context", "16",
            "--db", "none", "--json"]
    assert main([*argv, "--quantize", "w8"]) == 0
    w8 = json.loads(capsys.readouterr().out)
    assert main(argv) == 0
    fp16 = json.loads(capsys.readouterr().out)
    assert w8["case"] == "llama-tiny:w8/hbm-pim-int8/decode-b1-c16" and w8["slower_ops"] == 0
    gemvs = {o["workload"]: o for o in w8["ops"] if o["workload"].startswith("gemv")}
    lm_head = [w for w, o in gemvs.items() if "lm_head" in o["roles"]]
    assert [w.endswith(":fp16") for w in lm_head] == [True]  # the LM head stays as it is
    assert all(w.endswith(":w8") for w in gemvs if w not in lm_head)
    # on units that multiply INT8, the library kernels and the compiler both read the
    # weights in their format: half the bytes (a tiny GEMV is mostly fixed cost, so not
    # every figure moves)
    fp16_ops = {o["workload"].replace(":fp16", ":w8"): o for o in fp16["ops"]}
    quantized = sorted(set(gemvs) - set(lm_head))
    for key in ("library_ns", "bound_ns"):
        pairs = [(gemvs[w][key], fp16_ops[w][key]) for w in quantized]
        assert all(a <= b for a, b in pairs) and any(a < b for a, b in pairs), (key, pairs)
    assert w8["latency_ns"]["library"] < fp16["latency_ns"]["library"]
    assert main([*argv, "--quantize", "w3"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "w3" in err


def test_kernels_of_a_tuned_step_of_several_rows(tmp_path: Path, capsys) -> None:
    # a step of several rows compiles each GEMV where the one-row step keeps its weights
    # (a ``layout`` attribute): its schedules are looked up there, where tune stored them,
    # and the rows still name the operator
    db = f"sqlite:///{tmp_path / 't.db'}"
    step = ["--model", "llama-tiny", "--hw", "aim-gddr6", "--batch", "8", "--context", "32",
            "--db", db]
    assert main(["tune", *step, "--trials", "4", "--cost-model", "none", "--quiet"]) == 0
    capsys.readouterr()
    assert main(["kernels", *step, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    gemvs = [o for o in out["ops"] if o["workload"].startswith("gemv")]
    assert gemvs and not any("layout=" in o["workload"] for o in out["ops"])
    assert {o["found"] for o in gemvs} >= {"exact"}  # what tune measured, read back
    assert all(o["tuned_ns"] <= o["default_ns"] for o in out["ops"])
    parts = {d["workload"] for d in out["decomposition"]}
    assert parts == {o["workload"] for o in out["ops"]}
