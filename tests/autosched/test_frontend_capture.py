"""Capture of the transformers module on meta tensors: the llama-tiny graph node by node,
prefill, big models, every spelling the patterns accept, layer replication, host ops."""

from __future__ import annotations

import dataclasses
import time

import pytest

from autosched.frontend import (
    ModelConfig,
    ModelError,
    capture,
    get_model_config,
)
from autosched.frontend.capture import capture_nodes
from autosched.ir import OpGraph
from autosched.pipeline import model_graph

LAYER_ROLES = ["attn_norm", "q_proj", "k_proj", "v_proj", "qk_rotary", "attn", "o_proj",
               "attn_residual", "ffn_norm", "ffn_gate", "ffn_silu", "ffn_up", "ffn_mul",
               "ffn_down", "ffn_residual"]
SMALL = ModelConfig("llama", hidden=64, intermediate=96, layers=5, heads=4, kv_heads=2,
                    head_dim=16, vocab=101, max_positions=64, name="small")


@pytest.fixture(scope="module")
def tiny_decode() -> OpGraph:
    return capture("llama-tiny", phase="decode", batch=1, context=128)


def test_tiny_decode_nodes(tiny_decode: OpGraph) -> None:
    g = tiny_decode
    assert (g.phase, g.model, g.batch, g.tokens, g.context) == ("decode", "llama-tiny", 1, 1, 128)
    roles = [n.role for n in g]
    assert roles == ["embed"] + LAYER_ROLES * 4 + ["final_norm", "lm_head", "next_token"]
    assert [n.layer for n in g][1:-3] == [i for i in range(4) for _ in LAYER_ROLES]
    gemvs = [n for n in g if n.workload.op == "gemv"]
    assert len(gemvs) == 4 * 7 + 1 and all(n.workload.dtype == "fp16" for n in gemvs)
    dims = {n.role: n.workload.dims for n in g if n.layer == 2}
    assert dims["q_proj"] == dict(m=1, n=256, k=256)
    assert dims["k_proj"] == dims["v_proj"] == dict(m=1, n=128, k=256)
    assert dims["ffn_gate"] == dims["ffn_up"] == dict(m=1, n=688, k=256)
    assert dims["ffn_down"] == dict(m=1, n=256, k=688)
    assert dims["attn"] == dict(b=1, q=1, h=8, kvh=4, d=32, l=128)
    assert dims["qk_rotary"] == dict(m=1, h=12, d=32)
    assert dims["attn_norm"] == dict(m=1, n=256)
    assert g.node("l2.attn_norm").workload.attr("eps") == 1e-5
    assert g.node("l2.ffn_silu").workload.attr("fn") == "silu"
    assert g.node("embed").workload.dims == dict(m=1, n=256, v=4096)
    assert g.node("lm_head").workload.dims == dict(m=1, n=4096, k=256)
    assert g.node("next_token").workload.dims == dict(m=1, n=4096)


def test_nodes_name_their_parameters(tiny_decode: OpGraph) -> None:
    g = tiny_decode
    assert g.node("l3.q_proj").param("W") == "model.layers.3.self_attn.q_proj.weight"
    assert g.node("l0.ffn_norm").param("w") == "model.layers.0.post_attention_layernorm.weight"
    assert g.node("embed").param("table") == "model.embed_tokens.weight"
    assert g.node("l1.qk_rotary").param("rotary") == "model.rotary_emb"
    assert g.node("lm_head").param("W") == "lm_head.weight"


def test_tiny_decode_edges(tiny_decode: OpGraph) -> None:
    g = tiny_decode
    assert g.node("l0.attn_norm").inputs == ("embed",)
    assert g.node("l1.qk_rotary").inputs == ("l1.q_proj", "l1.k_proj")
    assert g.node("l1.attn").inputs == ("l1.qk_rotary", "l1.v_proj")
    assert g.node("l1.attn_residual").inputs == ("l0.ffn_residual", "l1.o_proj")
    assert g.node("l3.ffn_mul").inputs == ("l3.ffn_silu", "l3.ffn_up")
    assert g.node("next_token").inputs == ("lm_head",)
    assert OpGraph.from_json(g.to_json()) == g


def test_tiny_prefill_gives_gemm() -> None:
    g = capture("llama-tiny", phase="prefill", batch=2, prompt=64)
    assert (g.phase, g.tokens, g.context) == ("prefill", 64, 64)
    q = g.node("l0.q_proj").workload
    assert q.op == "gemm" and q.dims == dict(m=128, n=256, k=256)
    assert g.node("l0.attn").workload.dims == dict(b=2, q=64, h=8, kvh=4, d=32, l=64)
    assert g.node("l0.ffn_silu").workload.dims == dict(m=128, n=688)
    assert g.node("lm_head").workload.op == "gemv"  # last token only
    assert g.node("lm_head").workload.dims["m"] == 2


@pytest.mark.parametrize("batch, op", [(8, "gemv"), (9, "gemm")])
def test_gemv_gemm_threshold(batch: int, op: str) -> None:
    g = capture("llama-tiny", batch=batch, context=16)
    assert g.node("l0.o_proj").workload.op == op
    assert g.node("l0.attn").workload.dims["b"] == batch


@pytest.mark.parametrize("name", ["llama2-7b", "llama3-8b"])
def test_big_models_capture_on_meta_quickly(name: str) -> None:
    cfg = get_model_config(name)
    t0 = time.perf_counter()
    g = capture(name, context=4096)
    assert time.perf_counter() - t0 < 60.0  # generous: a real allocation would not fit
    assert len(g) == 1 + 15 * 32 + 3
    kv = cfg.kv_heads * 128
    assert g.node("l31.k_proj").workload.dims == dict(m=1, n=kv, k=4096)
    assert g.node("l31.k_proj").param("W") == "model.layers.31.self_attn.k_proj.weight"
    assert g.node("l0.ffn_down").workload.dims == dict(m=1, n=4096, k=cfg.intermediate)
    assert g.node("l5.attn").workload.dims == dict(b=1, q=1, h=32, kvh=cfg.kv_heads, d=128,
                                                   l=4096)
    assert g.node("lm_head").workload.dims == dict(m=1, n=cfg.vocab, k=4096)
    assert g.node("lm_head").workload.dtype == cfg.dtype


def test_two_captured_layers_repeat_to_the_whole_model() -> None:
    """The replicated graph is the graph of the whole model, captured layer by layer."""
    for cfg in (SMALL, dataclasses.replace(SMALL, model_type="qwen2", attention_bias=True,
                                           sliding_window=8, full_layers=(0, 1, 2))):
        short = capture_nodes(cfg, batch=1, tokens=1, length=32)
        whole = capture_nodes(cfg, batch=1, tokens=1, length=32, whole=True)
        assert short == whole and len(short) == 1 + 15 * 5 + 3


def test_qwen2_bias_and_tied_head_capture() -> None:
    cfg = ModelConfig("qwen2", hidden=128, intermediate=256, layers=2, heads=4, kv_heads=2,
                      head_dim=32, vocab=500, max_positions=64, tie_embeddings=True,
                      attention_bias=True, name="qwen-toy")
    g = capture(cfg, context=32)
    assert g.node("l0.q_proj").workload.dims == dict(m=1, n=128, k=128)
    assert [g.node(f"l0.{r}").workload.attr("bias") for r in ("q_proj", "k_proj", "v_proj",
                                                               "o_proj")] == [1, 1, 1, None]
    assert g.node("lm_head").workload.dims == dict(m=1, n=500, k=128)
    tied = {"lm_head.weight", "model.embed_tokens.weight"}  # one tensor, either name
    assert {g.node("lm_head").param("W"), g.node("embed").param("table")} <= tied
    assert [n.role for n in g if n.layer == 1] == LAYER_ROLES


def test_mistral_window_and_llama_mlp_bias() -> None:
    cfg = dataclasses.replace(SMALL, model_type="mistral", sliding_window=8, layers=2)
    att = model_graph(cfg, context=20)[1].node("l1.attn").workload
    assert att.attr("window") == 8 and att.dims["l"] == 20 and att.attr("capacity") == 20
    assert model_graph(cfg, context=8)[1].node("l1.attn").workload.attr("window") is None
    g = capture(dataclasses.replace(SMALL, layers=1, mlp_bias=True, attention_bias=True),
                context=8)
    assert all(g.node(f"l0.{r}").workload.attr("bias") == 1 for r in ("o_proj", "ffn_down"))


def test_eager_attention_and_layernorm_spellings(monkeypatch) -> None:
    """The decomposed attention of attn_implementation='eager' and nn.LayerNorm map too."""
    import transformers

    real = transformers.LlamaForCausalLM._from_config.__func__

    def eager(cls, config, **kw):
        config._attn_implementation = "eager"
        return real(cls, config, **kw)

    monkeypatch.setattr(transformers.LlamaForCausalLM, "_from_config", classmethod(eager))
    g = capture(dataclasses.replace(SMALL, layers=1, norm="layer"), context=8)
    assert [n.role for n in g if n.layer == 0] == LAYER_ROLES
    assert g.node("l0.attn").workload.dims == dict(b=1, q=1, h=4, kvh=2, d=16, l=8)
    assert g.node("l0.attn_norm").workload.op == "layernorm"
    assert g.node("l0.attn_norm").param("b") == "model.layers.0.input_layernorm.bias"


def test_unrecognised_op_runs_on_the_host_and_is_listed() -> None:
    g = capture(dataclasses.replace(SMALL, layers=2, hidden_act="mish"), context=8)
    act = g.node("l1.ffn_act").workload
    assert act.op == "extern" and act.attr("fn").startswith("mish-")
    assert act.dims == dict(m=1, n=96) and act.attr("ins") == "1x1x96"
    assert g.node("l1.ffn_mul").inputs == ("l1.ffn_act", "l1.ffn_up")


@pytest.mark.parametrize("kw, msg", [
    (dict(phase="train"), "phase"),
    (dict(context=513), "max_positions"),
    (dict(batch=0), "batch"),
    (dict(phase="prefill", prompt=-4), "prompt"),
])
def test_capture_argument_errors(kw: dict, msg: str) -> None:
    with pytest.raises(ModelError, match=msg):
        capture("llama-tiny", **kw)


def test_no_weights_are_allocated() -> None:
    """A 70B model (140 GB of weights) is captured within a few hundred MB."""
    import resource

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    g = capture("llama3-70b", context=64)
    assert len(g) == 1 + 15 * 80 + 3
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 2_000_000  # KB
