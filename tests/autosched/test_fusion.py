"""Fusion plans keep the model's semantics; the reference evaluator matches the
transformers model the graph was captured from."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from autosched.frontend import build_module, capture, get_model_config
from autosched.frontend.checkpoint import ModuleWeights
from autosched.fusion import (
    FusedView,
    FusionError,
    apply_fusion,
    fuse_weights,
    operands,
    output_parts,
)
from autosched.ir import OpGraph, tasks
from autosched.reference import evaluate
from search_spaces import ScheduleError, Workload
from search_spaces.fusion import FULL_FUSION, NO_FUSION, fusion_space

CFG = get_model_config("llama-tiny")
PLACEMENTS = list(fusion_space().enumerate())


@pytest.fixture(scope="module")
def decode() -> OpGraph:
    return capture(CFG, phase="decode", batch=2, context=16)


@pytest.fixture(scope="module")
def prefill() -> OpGraph:
    return capture(CFG, phase="prefill", batch=1, prompt=5)


def _random_weights(graph: OpGraph, seed: int = 0) -> dict[str, dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    out = {}
    for n in graph:
        d = n.workload.dims
        if n.workload.op in ("gemv", "gemm"):
            out[n.name] = {"W": rng.normal(0, 0.1, (d["n"], d["k"]))}
        elif n.workload.op == "rmsnorm":
            out[n.name] = {"w": rng.uniform(0.5, 1.5, d["n"])}
        elif n.workload.op == "embedding":
            out[n.name] = {"table": rng.normal(0, 1, (d["v"], d["n"]))}
    return out


def _caches(graph: OpGraph, seed: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(seed)
    shape = (graph.batch, CFG.kv_heads, graph.context, CFG.head_dim)
    return {n.name: (rng.normal(size=shape), rng.normal(size=shape))
            for n in graph if n.workload.op == "attention"}


def _torch_weights(model, graph: OpGraph) -> dict[str, dict[str, np.ndarray]]:
    """Each node's tensors, found by the parameter names the capture recorded."""
    w = ModuleWeights(model)
    return {n.name: {local: w.get(name).astype(np.float64) for local, name in n.params
                     if local != "rotary"} for n in graph}


@pytest.mark.parametrize("phase", ["decode", "prefill"])
def test_reference_matches_the_torch_model(phase, decode, prefill):
    from transformers import StaticCache

    graph = decode if phase == "decode" else prefill
    model = build_module(CFG, device="cpu", seed=3, dtype=torch.float32)
    with torch.no_grad():  # non-trivial norm scales
        for p_name, p in model.named_parameters():
            if p_name.endswith("norm.weight"):
                p.uniform_(0.5, 1.5, generator=torch.Generator().manual_seed(1))
    rng = np.random.default_rng(1)
    ids = rng.integers(0, CFG.vocab, (graph.batch, graph.tokens))
    caches = _caches(graph, 2) if phase == "decode" else {}
    cache = StaticCache(config=model.config, max_cache_len=graph.context)
    cache.early_initialization(graph.batch, CFG.kv_heads, CFG.head_dim, torch.float32,
                               torch.device("cpu"))
    past = graph.context - graph.tokens
    for i, layer in enumerate(cache.layers):
        layer.cumulative_length.fill_(past)
        if caches:
            layer.keys.copy_(torch.tensor(caches[f"l{i}.attn"][0], dtype=torch.float32))
            layer.values.copy_(torch.tensor(caches[f"l{i}.attn"][1], dtype=torch.float32))
    caches = {k: (a.astype(np.float32).astype(np.float64), b.astype(np.float32)
                  .astype(np.float64)) for k, (a, b) in caches.items()}
    pos = torch.arange(past, graph.context).expand(graph.batch, -1)
    with torch.no_grad():
        logits = model(input_ids=torch.tensor(ids), cache=cache, use_cache=True,
                       position_ids=pos, logits_to_keep=1).logits
    out = evaluate(graph, _torch_weights(model, graph), ids.reshape(-1), theta=CFG.rope_theta,
                   caches=caches)
    want = logits.double().numpy().reshape(graph.batch, -1)
    # float32 torch against float64 numpy through 4 layers: a few float32 ulps of the sums
    np.testing.assert_allclose(out["lm_head"], want, atol=2e-5 * np.abs(want).max())
    np.testing.assert_array_equal(out["next_token"][:, 0], want.argmax(-1))
    if caches:  # the new token's key was written where torch wrote it
        np.testing.assert_allclose(caches["l3.attn"][0], cache.layers[3].keys.double().numpy(),
                                   atol=1e-5)


@pytest.mark.parametrize("plan", PLACEMENTS, ids=lambda p: "-".join(k for k, v in p.items() if v)
                         or "none")
def test_every_plan_keeps_the_outputs(plan, decode, prefill):
    for graph in (decode, prefill):
        weights = _random_weights(graph)
        ids = np.arange(graph.batch * graph.tokens) * 37 % CFG.vocab
        base_caches, fused_caches = _caches(graph, 5), _caches(graph, 5)
        ref = evaluate(graph, weights, ids, caches=base_caches)
        fused = apply_fusion(graph, plan)
        got = evaluate(fused, fuse_weights(graph, plan, weights), ids, caches=fused_caches)
        vocab = ref["lm_head"].shape[1]
        np.testing.assert_allclose(got["lm_head"][:, :vocab], ref["lm_head"], rtol=1e-10,
                                   atol=1e-10)
        token = got["lm_head"][:, vocab:] if plan["argmax_epilogue"] else got["next_token"]
        np.testing.assert_array_equal(token, ref["next_token"])
        for name, (k, v) in base_caches.items():
            np.testing.assert_allclose(fused_caches[name][0], k, atol=1e-10)
            np.testing.assert_allclose(fused_caches[name][1], v, atol=1e-10)


def _gemvs_per_layer(graph: OpGraph) -> int:
    return sum(1 for n in graph if n.layer == 0 and n.workload.op == "gemv")


def test_fused_node_and_task_counts(decode):
    def plan(**on: bool) -> dict:
        p = {**NO_FUSION, **on}
        if p["merge_gate_up"]:
            p.setdefault("silu_mul_epilogue", False)
        if p["residual_epilogue"]:
            p.setdefault("norm_epilogue", False)
        if p["merge_qkv"]:
            p.setdefault("rope_epilogue", False)
        return p

    cases = [  # (plan, nodes, gemv nodes per layer, tasks)
        (NO_FUSION, 64, 7, 13),
        (plan(merge_qkv=True), 56, 5, 13),
        (plan(merge_gate_up=True), 60, 6, 13),
        (plan(merge_qkv=True, merge_gate_up=True), 52, 4, 13),
        (plan(merge_gate_up=True, silu_mul_epilogue=True), 52, 6, 11),  # no silu, mul
        (plan(residual_epilogue=True), 56, 7, 13),  # o_proj leaves q's task
        (plan(norm_into_linear=True), 55, 7, 13),  # rmsnorm gone, q/o split
        (plan(merge_qkv=True, rope_epilogue=True), 52, 5, 12),  # rope gone into qkv_proj
        # all 9 norms absorbed: 8 by the residual linears, the first by the embedding
        (plan(residual_epilogue=True, norm_epilogue=True), 47, 7, 12),
        (plan(argmax_epilogue=True), 63, 7, 12),  # argmax gone into the LM head
        (FULL_FUSION, 22, 4, 7),  # and rope; no norm left for norm_into_linear
        ({**FULL_FUSION, "argmax_epilogue": False}, 23, 4, 8),
    ]
    for p, nodes, gemvs, ntasks in cases:
        fused = apply_fusion(decode, p)
        got = (len(fused), _gemvs_per_layer(fused), len(tasks(fused)))
        assert got == (nodes, gemvs, ntasks), p
        assert sum(t.count for t in tasks(fused)) == len(fused)


def test_merged_outputs_are_sliced_by_views(decode):
    merged = apply_fusion(decode, {**NO_FUSION, "merge_qkv": True, "rope_epilogue": False,
                                   "merge_gate_up": True, "silu_mul_epilogue": True,
                                   "residual_epilogue": True, "norm_epilogue": False,
                                   "norm_into_linear": True})
    hd, kvd = CFG.heads * CFG.head_dim, CFG.kv_heads * CFG.head_dim
    qkv = merged.node("l0.qkv_proj")
    assert qkv.role == "qkv_proj" and qkv.workload.dims["n"] == hd + 2 * kvd
    assert qkv.workload.attr("prologue") == "rmsnorm" and qkv.workload.attr("eps") == 1e-5
    assert output_parts(merged, qkv) == {"q": (0, hd), "k": (hd, hd + kvd),
                                         "v": (hd + kvd, hd + 2 * kvd)}
    assert operands(merged, merged.node("l0.qk_rotary")) == {
        "x": (FusedView("l0.qkv_proj", 0, hd + kvd),)}
    att = operands(merged, merged.node("l0.attn"))
    assert att["v"] == (FusedView("l0.qkv_proj", hd + kvd, hd + 2 * kvd),)
    assert att["q"] == (FusedView("l0.qk_rotary", 0, hd),)
    gu = merged.node("l0.gate_up")
    assert gu.workload.attr("epilogue") == "silu_mul" and gu.workload.dims["n"] == 2 * 688
    down = operands(merged, merged.node("l0.ffn_down"))
    assert down == {"x": (FusedView("l0.gate_up", 0, 688),), "r": (FusedView("l0.o_proj", 0, 256),)}
    unfused_rope = operands(decode, decode.node("l0.qk_rotary"))["x"]
    assert unfused_rope == (FusedView("l0.q_proj", 0, hd), FusedView("l0.k_proj", 0, kvd))


def test_full_plan_rotates_in_qkv_and_normalises_in_the_residual_linears(decode):
    full = apply_fusion(decode, FULL_FUSION)
    hd, kvd = CFG.heads * CFG.head_dim, CFG.kv_heads * CFG.head_dim
    assert not [n for n in full if n.workload.op in ("rope", "rmsnorm")]
    qkv = full.node("l1.qkv_proj").workload
    assert (qkv.attr("epilogue"), qkv.attr("rope_heads"), qkv.attr("rope_d")) == (
        "rope", CFG.heads + CFG.kv_heads, CFG.head_dim)
    assert qkv.attr("prologue") is None  # its norm went into l0.ffn_down's epilogue
    assert full.node("l0.qkv_proj").workload.attr("prologue") is None  # into the embedding
    emb = full.node("embed")
    assert emb.workload.attr("epilogue") == "rmsnorm"
    assert output_parts(full, emb) == {"res": (0, 256), "norm": (256, 512)}
    assert operands(full, full.node("l0.qkv_proj")) == {"x": (FusedView("embed", 256, 512),)}
    assert operands(full, full.node("l0.o_proj"))["r"] == (FusedView("embed", 0, 256),)
    head = full.node("lm_head")
    assert "next_token" not in [n.role for n in full] and head.workload.attr("epilogue") == "argmax"
    assert output_parts(full, head) == {"out": (0, CFG.vocab), "token": (CFG.vocab,
                                                                          CFG.vocab + 1)}
    att = operands(full, full.node("l1.attn"))
    assert att == {"q": (FusedView("l1.qkv_proj", 0, hd),),
                   "k": (FusedView("l1.qkv_proj", hd, hd + kvd),),
                   "v": (FusedView("l1.qkv_proj", hd + kvd, hd + 2 * kvd),)}
    down = full.node("l0.ffn_down")
    assert down.workload.attr("epilogue") == "add_rmsnorm"
    assert output_parts(full, down) == {"res": (0, 256), "norm": (256, 512)}
    assert operands(full, full.node("l1.qkv_proj")) == {"x": (FusedView("l0.ffn_down", 256, 512),)}
    assert operands(full, full.node("l1.o_proj"))["r"] == (FusedView("l0.ffn_down", 0, 256),)
    assert operands(full, full.node("l0.gate_up")) == {"x": (FusedView("l0.o_proj", 256, 512),)}


def test_gate_up_without_epilogue_feeds_silu_and_mul_their_halves(decode):
    g = apply_fusion(decode, {**NO_FUSION, "merge_gate_up": True, "silu_mul_epilogue": False})
    assert operands(g, g.node("l1.ffn_silu")) == {"a": (FusedView("l1.gate_up", 0, 688),)}
    assert operands(g, g.node("l1.ffn_mul"))["b"] == (FusedView("l1.gate_up", 688, 1376),)


def test_prefill_lm_head_reads_the_last_token(prefill):
    full = apply_fusion(prefill, FULL_FUSION)
    (view,) = operands(full, full.node("lm_head"))["x"]
    assert view == FusedView("l3.ffn_down", 256, 512, last=True)  # the final norm's half


def test_fuse_weights_concatenates_in_part_order(decode):
    w = _random_weights(decode)
    fw = fuse_weights(decode, FULL_FUSION, w)
    np.testing.assert_array_equal(fw["l2.qkv_proj"]["W"], np.concatenate(
        [w["l2.q_proj"]["W"], w["l2.k_proj"]["W"], w["l2.v_proj"]["W"]]))
    np.testing.assert_array_equal(fw["l2.o_proj"]["out_norm_w"], w["l2.ffn_norm"]["w"])
    np.testing.assert_array_equal(fw["l3.ffn_down"]["out_norm_w"], w["final_norm"]["w"])
    np.testing.assert_array_equal(fw["embed"]["out_norm_w"], w["l0.attn_norm"]["w"])
    plain = {k: v for k, v in FULL_FUSION.items() if k != "norm_epilogue"}
    without = fuse_weights(decode, {**plain, "residual_epilogue": False}, w)
    np.testing.assert_array_equal(without["l0.qkv_proj"]["norm_w"], w["l0.attn_norm"]["w"])
    assert "l2.q_proj" not in fw and "l2.ffn_norm" not in fw


def test_apply_fusion_is_pure_and_round_trips(decode):
    before = decode.to_json()
    full = apply_fusion(decode, FULL_FUSION)
    assert decode.to_json() == before
    again = OpGraph.from_json(full.to_json())
    assert all(operands(again, n) == operands(full, n) for n in full)


def test_bad_plans_and_graphs_are_rejected(decode):
    with pytest.raises(ScheduleError, match="inactive"):
        apply_fusion(decode, {**NO_FUSION, "silu_mul_epilogue": True})
    # a gate_up whose output is also read elsewhere cannot absorb silu * up
    g = apply_fusion(decode, {**NO_FUSION, "merge_gate_up": True, "silu_mul_epilogue": False})
    nodes = list(g.nodes)
    i = next(k for k, n in enumerate(nodes) if n.name == "l0.ffn_down")
    nodes[i] = type(nodes[i])(nodes[i].name, nodes[i].workload, ("l0.ffn_mul", "l0.gate_up"),
                              0, "ffn_down")
    odd = type(g)(tuple(nodes), g.phase, g.model, g.batch, g.tokens, g.context)
    with pytest.raises(FusionError, match="silu_mul_epilogue needs"):
        apply_fusion(odd, {**NO_FUSION, "merge_gate_up": True, "silu_mul_epilogue": True})


def test_a_plan_recorded_before_argmax_epilogue_reads_it_as_off(decode):
    old = {k: v for k, v in FULL_FUSION.items() if k != "argmax_epilogue"}
    assert apply_fusion(decode, old) == apply_fusion(decode, {**FULL_FUSION,
                                                              "argmax_epilogue": False})
    assert "next_token" in [n.role for n in apply_fusion(decode, old)]


def test_logits_read_by_more_than_their_argmax_keep_the_argmax_node(decode):
    nodes = list(decode.nodes)
    extra = type(nodes[-1])("probe", Workload.make("argmax", m=2, n=CFG.vocab), ("lm_head",),
                            None, "next_token")
    odd = type(decode)((*nodes, extra), decode.phase, decode.model, decode.batch,
                       decode.tokens, decode.context)
    fused = apply_fusion(odd, {**NO_FUSION, "argmax_epilogue": True})
    assert fused.node("lm_head").workload.attr("epilogue") is None
    assert [n.name for n in fused if n.workload.op == "argmax"] == ["next_token", "probe"]


@pytest.mark.parametrize("arch", ["qwen3", "cohere", "stablelm"])
def test_per_head_norms_at_prefill_match_the_torch_model(arch, tmp_path):
    """At several tokens a per-head q/k norm reads its projection as one row per head (a
    reshaping view): the reference follows it and matches the model (Qwen3's RMS norms,
    Cohere's LayerNorm with a weight row per head, StableLM's list of LayerNorms)."""
    from transformers import AutoModelForCausalLM

    from experiments.archs import tiny_config

    cfg = tiny_config(arch)
    cfg.vocab_size = 128
    if arch == "stablelm":
        cfg.qk_layernorm = True
    model = AutoModelForCausalLM.from_config(cfg).float()
    with torch.no_grad():
        for p_name, p in model.named_parameters():
            if "norm" in p_name and p_name.endswith("weight"):
                p.uniform_(0.5, 1.5, generator=torch.Generator().manual_seed(1))
    model.save_pretrained(tmp_path)
    mcfg = get_model_config(str(tmp_path))
    graph = capture(mcfg, phase="prefill", batch=2, prompt=3)
    assert graph.by_role("q_norm")[0].workload.dims["m"] == 2 * 3 * mcfg.heads
    weights = {n.name: _norm_weights(model, n) for n in graph}
    ids = np.random.default_rng(1).integers(0, mcfg.vocab, (graph.batch, graph.tokens))
    with torch.no_grad():
        want = model(input_ids=torch.tensor(ids), logits_to_keep=1).logits.double().numpy()
    out = evaluate(graph, weights, ids.reshape(-1), theta=mcfg.rope_theta, caches={})
    got = out["logits"] if "logits" in out else out["lm_head"]
    np.testing.assert_allclose(got, want.reshape(graph.batch, -1),
                               atol=2e-5 * np.abs(want).max())


def _norm_weights(model, node) -> dict[str, np.ndarray]:
    """A node's stored tensors; a norm without a scale or shift reads ones and zeros."""
    w = ModuleWeights(model)
    out = {local: w.get(name).astype(np.float64) for local, name in node.params
           if local != "rotary" and not name.startswith(("buffer:", "@"))}
    if node.workload.op == "layernorm":
        size = node.workload.dims["n"] * int(node.workload.attr("heads", 1))
        out.setdefault("w", np.ones(size))
        out.setdefault("b", np.zeros(size))
    return out
