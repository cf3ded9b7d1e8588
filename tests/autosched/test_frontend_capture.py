"""Capture on meta tensors: the llama-tiny graph node by node, prefill, big models, errors."""

from __future__ import annotations

import time

import pytest
import torch

from autosched.frontend import ModelConfig, ModelError, OpGraph, capture, get_model_config
from autosched.frontend.llama import MLP

LAYER_ROLES = ["attn_norm", "q_proj", "k_proj", "v_proj", "rope", "attn", "o_proj",
               "attn_residual", "ffn_norm", "ffn_gate", "ffn_silu", "ffn_up", "ffn_mul",
               "ffn_down", "ffn_residual"]


@pytest.fixture(scope="module")
def tiny_decode() -> OpGraph:
    return capture("llama-tiny", phase="decode", batch=1, context=128)


def test_tiny_decode_nodes(tiny_decode: OpGraph) -> None:
    g = tiny_decode
    assert (g.phase, g.model, g.batch, g.tokens, g.context) == ("decode", "llama-tiny", 1, 1, 128)
    roles = [n.role for n in g]
    assert roles == ["embed"] + LAYER_ROLES * 4 + ["final_norm", "lm_head", "argmax"]
    assert [n.layer for n in g][1:-3] == [i for i in range(4) for _ in LAYER_ROLES]
    gemvs = [n for n in g if n.workload.op == "gemv"]
    assert len(gemvs) == 4 * 7 + 1 and all(n.workload.dtype == "fp16" for n in gemvs)
    dims = {n.role: n.workload.dims for n in g if n.layer == 2}
    assert dims["q_proj"] == dict(m=1, n=256, k=256)
    assert dims["k_proj"] == dims["v_proj"] == dict(m=1, n=128, k=256)
    assert dims["ffn_gate"] == dims["ffn_up"] == dict(m=1, n=688, k=256)
    assert dims["ffn_down"] == dict(m=1, n=256, k=688)
    assert dims["attn"] == dict(b=1, q=1, h=8, kvh=4, d=32, l=128)
    assert dims["rope"] == dict(m=1, h=12, d=32)
    assert dims["attn_norm"] == dict(m=1, n=256)
    assert g.node("l2.ffn_silu").workload.attr("fn") == "silu"
    assert g.node("embed").workload.dims == dict(m=1, n=256, v=4096)
    assert g.node("lm_head").workload.dims == dict(m=1, n=4096, k=256)
    assert g.node("argmax").workload.dims == dict(m=1, n=4096)


def test_tiny_decode_edges(tiny_decode: OpGraph) -> None:
    g = tiny_decode
    assert g.node("l0.attn_norm").inputs == ("embed",)
    assert g.node("l1.rope").inputs == ("l1.q_proj", "l1.k_proj")
    assert g.node("l1.attn").inputs == ("l1.rope", "l1.v_proj")
    assert g.node("l1.attn_residual").inputs == ("l0.ffn_residual", "l1.o_proj")
    assert g.node("l3.ffn_mul").inputs == ("l3.ffn_silu", "l3.ffn_up")
    assert g.node("argmax").inputs == ("lm_head",)
    assert OpGraph.from_json(g.to_json()) == g


def test_tiny_prefill_gives_gemm() -> None:
    g = capture("llama-tiny", phase="prefill", batch=2, prompt=64)
    assert (g.phase, g.tokens, g.context) == ("prefill", 64, 64)
    q = g.node("l0.q_proj").workload
    assert q.op == "gemm" and q.dims == dict(m=128, n=256, k=256)
    assert g.node("l0.attn").workload.dims == dict(b=2, q=64, h=8, kvh=4, d=32, l=64)
    assert g.node("l0.ffn_silu").workload.dims == dict(m=128, n=688)
    assert g.node("final_norm").workload.dims == dict(m=2, n=256)  # last token only
    assert g.node("lm_head").workload.op == "gemv"


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
    assert time.perf_counter() - t0 < 20.0  # generous bound: a real allocation would not fit
    assert len(g) == 1 + 15 * 32 + 3
    kv = cfg.kv_heads * 128
    assert g.node("l31.k_proj").workload.dims == dict(m=1, n=kv, k=4096)
    assert g.node("l0.ffn_down").workload.dims == dict(m=1, n=4096, k=cfg.intermediate)
    assert g.node("l5.attn").workload.dims == dict(b=1, q=1, h=32, kvh=cfg.kv_heads, d=128,
                                                   l=4096)
    assert g.node("lm_head").workload.dims == dict(m=1, n=cfg.vocab, k=4096)
    assert g.node("lm_head").workload.dtype == cfg.dtype
    if name == "llama3-8b":
        assert kv == 1024 and cfg.dtype == "bf16"


def test_qwen2_bias_and_tied_head_capture() -> None:
    cfg = ModelConfig("qwen2", hidden=128, intermediate=256, layers=2, heads=4, kv_heads=2,
                      head_dim=32, vocab=500, max_positions=64, tie_embeddings=True,
                      attention_bias=True, name="qwen-toy")
    g = capture(cfg, context=32)
    assert g.node("l0.q_proj").workload.dims == dict(m=1, n=128, k=128)
    assert g.node("lm_head").workload.dims == dict(m=1, n=500, k=128)
    assert [n.role for n in g if n.layer == 1] == LAYER_ROLES


def test_unmapped_op_names_op_and_module(monkeypatch: pytest.MonkeyPatch) -> None:
    def gelu_forward(self: MLP, x: torch.Tensor) -> torch.Tensor:
        h = self.ffn_norm(x)
        return x + self.down_proj(torch.nn.functional.gelu(self.gate_proj(h)))

    monkeypatch.setattr(MLP, "forward", gelu_forward)
    with pytest.raises(ModelError, match=r"aten\.gelu.*layers\.0\.mlp"):
        capture("llama-tiny", context=8)


@pytest.mark.parametrize("kw, msg", [
    (dict(phase="train"), "phase"),
    (dict(context=513), "max_positions"),
    (dict(batch=0), "batch"),
    (dict(phase="prefill", prompt=-4), "prompt"),
])
def test_capture_argument_errors(kw: dict, msg: str) -> None:
    with pytest.raises(ModelError, match=msg):
        capture("llama-tiny", **kw)
