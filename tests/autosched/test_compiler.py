"""Whole-model compiler: numerics against torch, figures, glue, and a check that can fail."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import autosched.compiler.builder as compile_mod
from autosched.api import compile_model, run_check, simulate_model
from autosched.cli import main
from autosched.frontend import ModelConfig
from autosched.frontend.source import load_source
from search_spaces.fusion import FULL_FUSION

# odd shapes everywhere: 5 query heads on 1 KV head (GQA 5), prime intermediate and vocab,
# attention biases and tied embeddings (qwen2)
ODD = ModelConfig("qwen2", hidden=160, intermediate=347, layers=2, heads=5, kv_heads=1,
                  head_dim=32, vocab=997, max_positions=64, tie_embeddings=True,
                  attention_bias=True, name="odd-qwen2")


@pytest.mark.parametrize("hw", ["hbm-pim", "aim-gddr6"])
def test_llama_tiny_generation_matches_torch(hw: str) -> None:
    rep = run_check("llama-tiny", hw, steps=4)
    assert rep.passed, rep.to_dict()
    assert 0 < rep.max_rel_err <= rep.tolerance  # the device arithmetic is visible, and bounded
    assert len(rep.steps) == 4


@pytest.mark.parametrize("hw", ["hbm-pim", "aim-gddr6"])
def test_odd_config_generation_matches_torch(hw: str) -> None:
    rep = run_check(ODD, hw, steps=4)
    assert rep.passed, rep.to_dict()


def test_fused_plan_matches_torch() -> None:
    assert run_check("llama-tiny", "aim-gddr6", steps=3, fusion=FULL_FUSION).passed


def test_check_fails_on_wrong_weights(monkeypatch) -> None:
    from autosched.families.gemv import GemvFamily

    real = GemvFamily.weights

    def corrupt(self, model, node):
        out = real(self, model, node)
        if node.role == "ffn_down" and node.layer == 1:
            out = {"W": out["W"] * 1.25}
        return out

    monkeypatch.setattr(GemvFamily, "weights", corrupt)
    assert not run_check("llama-tiny", "aim-gddr6", steps=2).passed


def _prefill_error(model: object, hw: str, ids: np.ndarray, fusion: dict | None) -> float:
    """The prefill step's last-token logits against the ``transformers`` model's, as the
    largest error relative to the largest logit."""
    from transformers import StaticCache

    cm = compile_model(model, hw, phase="prefill", context=ids.shape[1], fusion=fusion)
    src = load_source(cm.cfg, dtype=cm.cfg.dtype if hw == "hbm-pim" else "bf16")
    mems = cm.memories()
    cm.place(mems, src.weights)
    out = cm.outputs(cm.execute(mems, src.weights, ids, np.arange(ids.shape[1])))
    cache = StaticCache(config=src.reference.config, max_cache_len=ids.shape[1])
    with torch.no_grad():
        want = src.reference(input_ids=torch.from_numpy(ids), cache=cache, use_cache=True,
                             logits_to_keep=1).logits.float()
    want = want.reshape(-1).numpy()
    got = out[cm.logits][: cm.cfg.vocab]
    return float(np.max(np.abs(got - want)) / np.max(np.abs(want)))


@pytest.mark.parametrize("fusion", [None, FULL_FUSION])
def test_prefill_with_several_rows_matches_torch(fusion) -> None:
    """Three prompt tokens: glue kernels gather rows and the last token's row for the head."""
    assert _prefill_error("llama-tiny", "aim-gddr6", np.array([[5, 17, 3]]), fusion) <= 0.02


def test_a_prompt_longer_than_its_sliding_window_matches_torch() -> None:
    """Nine prompt tokens through a 4-position window (Gemma 3: a sliding layer, then a
    full one): the slice of positions the window's cache keeps joins the attention, which
    masks each query's positions outside the window."""
    from experiments.archs import tiny_config

    cfg = tiny_config("gemma3_text")
    assert cfg.sliding_window == 4
    ids = np.array([[5, 17, 3, 44, 9, 80, 23, 61, 12]])
    assert _prefill_error(cfg, "hbm-pim", ids, FULL_FUSION) <= 0.01


@pytest.mark.parametrize("arch", ["cohere", "stablelm"])
def test_per_head_layernorms_at_prefill_match_torch(arch: str) -> None:
    """Five prompt tokens through per-head q/k LayerNorms fused into the projection's
    epilogue (Cohere's weight row per head, StableLM's list of LayerNorms): the epilogue
    normalises each token's heads."""
    from experiments.archs import tiny_config

    cfg = tiny_config(arch)
    cfg.qk_layernorm = True  # StableLM's (Cohere's tiny config sets use_qk_norm)
    ids = np.array([[5, 17, 3, 44, 9]])
    assert _prefill_error(cfg, "hbm-pim", ids, FULL_FUSION) <= 0.01


def test_simulate_figures_are_consistent() -> None:
    f = simulate_model("llama-tiny", "hbm-pim", context=32)
    assert f.latency_ns >= f.bound_ns > 0
    assert f.baseline_ns > 0 and f.tokens_per_s == pytest.approx(1e9 / f.latency_ns)
    # every node of llama-tiny decode under the default fusion plan (64 unfused)
    assert sum(o["count"] for o in f.ops) == 22
    assert f.lookups == {"default": 22}
    unfused = simulate_model("llama-tiny", "hbm-pim", context=32, fusion={}, baseline=False)
    assert sum(o["count"] for o in unfused.ops) == 64 and unfused.latency_ns > f.latency_ns


def test_cli_compile_simulate_run(tmp_path, capsys) -> None:
    prog = tmp_path / "p.json"
    assert main(["compile", "--model", "llama-tiny", "-o", str(prog), "--asm",
                 str(tmp_path / "p.s")]) == 0
    assert json.loads(prog.read_text())["groups"][0]["program"]["streams"]
    assert ".stream host host" in (tmp_path / "p.s").read_text()
    capsys.readouterr()
    assert main(["simulate", "--model", "llama-tiny", "--hw", "aim-gddr6", "--json",
                 "--context", "16"]) == 0
    sim = json.loads(capsys.readouterr().out)
    assert {"latency_ns", "bound_ns", "baseline_ns", "tokens_per_s", "energy_pj"} <= set(sim)
    assert {"op", "workload", "count", "latency_ns"} <= set(sim["ops"][0])
    assert main(["run", "--model", "llama-tiny", "--hw", "aim-gddr6", "--check", "--steps",
                 "2", "--json"]) == 0
    run = json.loads(capsys.readouterr().out)
    assert {"max_abs_err", "max_rel_err", "tokens_match", "steps"} <= set(run)


def test_cli_lists_the_ops_run_on_the_host(tmp_path, capsys) -> None:
    """An activation no operator family covers (Mish) runs on the host and is named."""
    from experiments.scenarios import TINY_CONFIG

    config = tmp_path / "mish.json"
    config.write_text(json.dumps({**TINY_CONFIG, "hidden_act": "mish"}))
    assert main(["compile", "--model", str(config), "--context", "8", "--db", "none",
                 "-o", str(tmp_path / "p.json")]) == 0
    line = next(s for s in capsys.readouterr().out.splitlines() if s.startswith("host ops"))
    assert "mish-" in line and "l0.ffn_act" in line
    assert main(["simulate", "--model", str(config), "--context", "8", "--db", "none",
                 "--json"]) == 0
    (fn, nodes), = json.loads(capsys.readouterr().out)["host_ops"].items()
    assert fn.startswith("mish-") and "l0.ffn_act" in nodes
    assert main(["simulate", "--model", "llama-tiny", "--context", "8", "--db", "none"]) == 0
    assert "host ops (no operator family covers them): none" in capsys.readouterr().out


def test_cli_unknown_model_exits_2(capsys) -> None:
    assert main(["simulate", "--model", "nope-7b"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("autosched: error:") and "nope-7b" in err and len(err.splitlines()) == 1


# head_dim 16: the weighted sum on PIM puts V on one unit per channel, addressed as a
# single bank (its unit stride reaches past the last bank)
HD16 = ModelConfig("llama", hidden=96, intermediate=200, layers=1, heads=6, kv_heads=2,
                   head_dim=16, vocab=300, max_positions=32, name="hd16")


@pytest.mark.parametrize("hw", ["hbm-pim", "aim-gddr6"])
def test_head_dim_16_generation_matches_torch(hw: str) -> None:
    rep = run_check(HD16, hw, steps=3)
    assert rep.passed, rep.to_dict()


def test_invalid_lowering_is_an_internal_error_exit_1(monkeypatch, capsys) -> None:
    """A lowering that emits an invalid program is stopped before timing, named, exit 1."""
    import dataclasses

    from autosched.families.registry import family_of
    from search_spaces import Workload
    from sim.isa import Pre
    from sim.program import Stream

    low = family_of(Workload.make("rmsnorm", m=1, n=8))
    real = type(low).lower

    def broken(self, workload, point, hw):
        k = real(self, workload, point, hw)
        bad = Stream("pimX", "pim", (0,), (Pre(0, hw.org.banks_per_channel),))
        prog = dataclasses.replace(k.program, streams=(*k.program.streams, bad))
        return dataclasses.replace(k, program=prog)

    monkeypatch.setattr(type(low), "lower", broken)
    compile_mod._build.cache_clear()  # kernels built by earlier tests would hide the bug
    try:
        assert main(["simulate", "--model", "llama-tiny", "--context", "8"]) == 1
    finally:
        compile_mod._build.cache_clear()
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "internal compiler error" in err
    assert "lowering of" in err and "with schedule" in err and "step 16 outside" in err
