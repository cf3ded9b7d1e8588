"""Every supported architecture's tiny checkpoint (``experiments.archs``: its own config
class, norm scales drawn at random, ``save_pretrained`` with safetensors) through
``autosched run --check`` on one preset: tokens equal to ``generate()``, logits within
tolerance. Both presets, eight steps and the full fusion plan are
``experiments/bench_archs.py``. An activation no pattern knows (Mish) runs on the host,
checked and named by ``simulate``."""

from __future__ import annotations

import json

import pytest

from autosched.cli import main
from autosched.frontend import ModelConfig
from autosched.pipeline import model_graph
from experiments.archs import ARCHS, tiny_checkpoint, tiny_config


@pytest.mark.parametrize("arch", sorted(ARCHS))
def test_tiny_checkpoint_matches_generate(tmp_path, capsys, arch: str) -> None:
    folder = tiny_checkpoint(arch, tmp_path / arch)
    assert ModelConfig.from_hf(folder).model_type == arch
    assert main(["run", "--model", str(folder), "--hw", "hbm-pim", "--check", "--steps",
                 "4", "--db", "none", "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["passed"] and rep["tokens_match"], rep
    assert rep["max_rel_err"] <= rep["tolerance"]


def test_an_activation_no_pattern_knows_runs_on_the_host(tmp_path, capsys) -> None:
    import transformers

    from autosched.frontend.module import init_weights

    cfg = tiny_config("llama")
    cfg.hidden_act = "mish"
    model = transformers.LlamaForCausalLM(cfg)
    init_weights(model, seed=3, norms="random")
    model.save_pretrained(tmp_path)
    _, graph = model_graph(str(tmp_path), context=8)
    acts = [n for n in graph.by_role("ffn_act") if n.workload.op == "extern"]
    assert len(acts) == 2 and all(n.workload.attr("fn").startswith("mish-") for n in acts)
    assert main(["run", "--model", str(tmp_path), "--hw", "aim-gddr6", "--check", "--steps",
                 "4", "--db", "none", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["passed"]
    assert main(["simulate", "--model", str(tmp_path), "--hw", "aim-gddr6", "--context", "8",
                 "--db", "none"]) == 0
    assert "mish" in capsys.readouterr().out


def test_the_config_kept_inside_is_the_users_own(tmp_path) -> None:
    """The module is built from the checkpoint's config (Gemma 2's soft-capping values),
    the summary is hashable and JSON round-trips, and a subset keeps each layer's kind."""
    folder = tiny_checkpoint("gemma2", tmp_path / "g")
    cfg = ModelConfig.from_hf(folder)
    from autosched.frontend.hf_config import to_hf

    hf = to_hf(cfg)
    assert (hf.attn_logit_softcapping, hf.final_logit_softcapping) == (50.0, 30.0)
    assert ModelConfig.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg
    assert hash(cfg) == hash(ModelConfig.from_dict(cfg.to_dict()))
    one = cfg.subset((1,))
    assert one.layers == 1 and to_hf(one).layer_types == [hf.layer_types[1]]
    assert one.window(0) == cfg.window(1)


def test_neutral_norms_follow_the_architecture() -> None:
    """Gemma's norms scale by ``1 + w``: their neutral weight is 0; Llama's is 1."""
    from autosched.frontend.module import build_module

    for arch, want in (("gemma", 0.0), ("llama", 1.0)):
        cfg = ModelConfig.from_hf(tiny_config(arch).to_dict())
        model = build_module(cfg, device="cpu", seed=0)
        assert float(model.model.norm.weight.detach().float().mean()) == want
        again = build_module(cfg, device="cpu", seed=0, norms="random")
        assert float((again.model.norm.weight.detach().float() - want).abs().max()) > 0


@pytest.mark.parametrize("arch", ["olmo2", "exaone4"])
def test_a_post_norm_only_block_names_its_mlp_and_fuses_it(tmp_path, arch: str) -> None:
    """OLMo 2 and EXAONE 4 have no norm before the MLP: it reads the attention's residual
    sum, and is still named (gate, up, down, post-norm) so the fusion plan packs gate and
    up with their activation and puts the post-norm and residual into the down GEMV."""
    from search_spaces.fusion import FULL_FUSION

    folder = tiny_checkpoint(arch, tmp_path / arch)
    _, plain = model_graph(str(folder), context=8, fusion={})
    layers = len(plain.by_role("attn"))
    for role in ("ffn_gate", "ffn_up", "ffn_down", "ffn_post_norm", "ffn_residual"):
        assert len(plain.by_role(role)) == layers, role
    _, fused = model_graph(str(folder), context=8, fusion=dict(FULL_FUSION))
    down = fused.by_role("ffn_down")
    assert len(fused.by_role("gate_up")) == layers and len(down) == layers
    assert all(n.workload.attr("epilogue", "").startswith("norm_add") for n in down)


@pytest.mark.parametrize("arch, epi", [("qwen3", "qknorm_rope"), ("gemma3_text", "qknorm_rope"),
                                       ("cohere", "qklnorm_rope")])
def test_per_head_qk_norms_join_the_rotary_epilogue(tmp_path, arch: str, epi: str) -> None:
    """Qwen3's, Gemma 3's and Cohere's per-head q and k norms sit between the merged
    projection and the rotary: under the full plan both norms and the rope become the
    projection's epilogue (q's heads counted apart from k's), no node of them left.
    Cohere's are LayerNorms with a scale per head, before an interleaved rope."""
    from search_spaces.fusion import FULL_FUSION

    folder = tiny_checkpoint(arch, tmp_path / arch)
    _, g = model_graph(str(folder), context=8, fusion=dict(FULL_FUSION))
    qkv = g.by_role("qkv_proj")
    assert qkv and all(n.workload.attr("epilogue") == epi for n in qkv)
    assert {n.workload.attr("qk_per_head") for n in qkv} == {1 if arch == "cohere" else None}
    assert {(n.workload.attr("qk_heads"), n.workload.attr("rope_heads")) for n in qkv} == \
        {(4, 6)}
    assert not any(g.by_role(r) for r in ("q_norm", "k_norm", "qk_rotary"))


def test_two_layernorms_of_one_sum_become_prologues(tmp_path) -> None:
    """GPT-NeoX normalises each block's input twice (attention's norm and the MLP's):
    under the full plan each norm, read by one linear, becomes that linear's prologue and
    no LayerNorm is left a node."""
    from search_spaces.fusion import FULL_FUSION

    folder = tiny_checkpoint("gpt_neox", tmp_path / "gpt_neox")
    _, g = model_graph(str(folder), context=8, fusion=dict(FULL_FUSION))
    assert not [n for n in g if n.workload.op == "layernorm"]
    assert {n.role for n in g if n.workload.attr("prologue") == "layernorm"} == \
        {"qkv_proj", "ffn_up"}


def test_the_final_soft_cap_joins_the_lm_head(tmp_path) -> None:
    """Gemma 2 soft-caps its logits before the argmax: under the full plan the LM head
    caps and picks in its one epilogue, no node of either left."""
    from search_spaces.fusion import FULL_FUSION

    folder = tiny_checkpoint("gemma2", tmp_path / "gemma2")
    _, g = model_graph(str(folder), context=8, fusion=dict(FULL_FUSION))
    head = g.by_role("lm_head")[0].workload
    assert (head.attr("epilogue"), head.attr("cap")) == ("softcap_argmax", 30.0)
    assert not g.by_role("logits") and not g.by_role("next_token")


def test_a_list_of_per_head_layernorms_is_one_per_head_norm(tmp_path, capsys) -> None:
    """StableLM's ``qk_layernorm`` splits q and k into heads, normalises each with its own
    LayerNorm and joins them: that is one LayerNorm with a scale per head (the heads'
    scales joined), so the roles find q_proj and q_norm, the full plan makes them the
    projection's ``qklnorm_rope`` epilogue (partial rotary), and the step checks."""
    import torch
    from transformers import AutoModelForCausalLM

    from autosched.frontend.module import init_weights
    from search_spaces.fusion import FULL_FUSION

    cfg = tiny_config("stablelm")
    cfg.qk_layernorm = True
    model = AutoModelForCausalLM.from_config(cfg)
    init_weights(model, seed=0, norms="random")
    model.to(torch.float16).save_pretrained(tmp_path, safe_serialization=True)
    _, plain = model_graph(str(tmp_path), context=8, fusion={})
    q = plain.by_role("q_norm")
    assert len(q) == len(plain.by_role("attn")) and not plain.by_role("linear")
    assert q[0].workload.attr("heads") == 4 and q[0].param("w").count("|") == 3
    _, fused = model_graph(str(tmp_path), context=8, fusion=dict(FULL_FUSION))
    qkv = fused.by_role("qkv_proj")[0].workload
    assert (qkv.attr("epilogue"), qkv.attr("qk_per_head"), qkv.attr("rope_rot")) == (
        "qklnorm_rope", 1, 4)
    assert main(["run", "--model", str(tmp_path), "--hw", "aim-gddr6", "--check", "--steps",
                 "4", "--db", "none", "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["passed"] and rep["tokens_match"], rep
