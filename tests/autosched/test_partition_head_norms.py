"""Tensor parallelism and q/k norms: a per-head norm splits with the heads; a norm over
the whole projection or with per-head weights is refused, never computed on one
device's heads as if they were all of them."""

from __future__ import annotations

import json

import pytest

from autosched.compiler.partition import shard_graph
from autosched.pipeline import model_graph
from experiments.archs import tiny_config
from sim.errors import AutoschedError


def _graph(model_type: str, tmp_path):
    cfg = tiny_config(model_type)
    cfg.vocab_size = 128
    cfg.save_pretrained(tmp_path)
    return model_graph(str(tmp_path / "config.json"), context=8)[1]


def test_per_head_norm_splits_with_the_heads(tmp_path) -> None:
    graph = _graph("qwen3", tmp_path)
    whole = {n.name: n.workload for n in graph.nodes}
    shard = {n.name: n.workload for n in shard_graph(graph, 2).nodes}
    assert shard["l0.q_norm"].dims["m"] == whole["l0.q_norm"].dims["m"] // 2
    assert shard["l0.k_norm"].dims["m"] == whole["l0.k_norm"].dims["m"] // 2
    assert shard["l0.q_norm"].dims["n"] == whole["l0.q_norm"].dims["n"]


@pytest.mark.parametrize("model_type, what", [("olmo2", "whole-width"),
                                              ("cohere", "per-head-weighted")])
def test_norm_that_cannot_split_is_refused(model_type: str, what: str, tmp_path) -> None:
    graph = _graph(model_type, tmp_path)
    with pytest.raises(AutoschedError, match=f"{what} q_norm does not split"):
        shard_graph(graph, 2)


@pytest.mark.parametrize("model_type", ["stablelm", "phi"])
def test_a_residual_fused_into_a_reduced_projection_is_refused(model_type, tmp_path) -> None:
    """Every residual epilogue counts (``add_layernorm``, and a parallel block's MLP
    down projection that adds ``x``): each device would add the residual to its part."""
    from search_spaces.fusion import FULL_FUSION

    cfg = tiny_config(model_type)
    cfg.vocab_size = 128
    cfg.save_pretrained(tmp_path)
    graph = model_graph(str(tmp_path / "config.json"), context=8, fusion=dict(FULL_FUSION))[1]
    with pytest.raises(AutoschedError, match="a residual fused into (o_proj|ffn_down)"):
        shard_graph(graph, 2)


def test_per_head_scales_fused_into_the_projection_are_refused(tmp_path) -> None:
    """Under the full plan Cohere's per-head-weighted norms live in the qkv projection's
    epilogue: splitting that projection's heads is refused as the norm nodes are."""
    from search_spaces.fusion import FULL_FUSION

    cfg = tiny_config("cohere")
    cfg.vocab_size = 128
    cfg.save_pretrained(tmp_path)
    graph = model_graph(str(tmp_path / "config.json"), context=8, fusion=dict(FULL_FUSION))[1]
    assert graph.by_role("qkv_proj")[0].workload.attr("qk_per_head") == 1
    with pytest.raises(AutoschedError, match="scale per head do not split"):
        shard_graph(graph, 2)


def _stablelm_qk(tmp_path):
    cfg = tiny_config("stablelm")
    cfg.vocab_size, cfg.qk_layernorm = 128, True  # a list of per-head LayerNorms
    cfg.save_pretrained(tmp_path)
    return str(tmp_path / "config.json")


def test_stages_follow_the_data_where_the_roles_place_nothing(tmp_path) -> None:
    """StableLM's per-head q/k norm list leaves linears and norms without a layer (or in
    the layer before): each node's stage is never before the stages of its inputs."""
    from autosched.compiler.partition import Partition, stage_of

    graph = model_graph(_stablelm_qk(tmp_path), context=8)[1]
    assert any(n.role == "linear" for n in graph)
    where = stage_of(graph, Partition.even(1, 2, 2))
    assert all(where[i] <= where[n.name] for n in graph for i in n.inputs)
    assert where["embed"] == 0 and where["lm_head"] == 1


def test_a_structure_the_roles_do_not_know_compiles_for_one_device(tmp_path, capsys) -> None:
    """Such a model is refused on several devices by name, and left out of the
    partitions ``simulate`` chooses from (as OLMo 2's whole-width norms leave out
    tensor parallelism), so a multi-device system runs it on one device."""
    from autosched.cli import main

    model = _stablelm_qk(tmp_path)
    for part in ("1x2", "2x1"):
        assert main(["simulate", "--model", model, "--hw", "hbm-pim-x16", "--context", "8",
                     "--db", "none", "--partition", part]) == 2
        assert "compiles for one device only" in capsys.readouterr().err
    for m in (model, str(_graph_dir("olmo2", tmp_path / "o"))):
        assert main(["simulate", "--model", m, "--hw", "hbm-pim-x16", "--context", "8",
                     "--db", "none", "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["partition"]["tp"] == 1


def _graph_dir(model_type: str, folder):
    cfg = tiny_config(model_type)
    cfg.vocab_size = 128
    cfg.save_pretrained(folder)
    return folder / "config.json"
