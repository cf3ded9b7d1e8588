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


def _unplaced(graph, name: str):
    """``graph`` with node ``name`` as the roles leave a structure they do not know: no
    decoder role, no layer."""
    import dataclasses

    nodes = tuple(dataclasses.replace(n, role="linear", layer=None) if n.name == name else n
                  for n in graph.nodes)
    return dataclasses.replace(graph, nodes=nodes)


def test_stages_follow_the_data_where_the_roles_place_nothing(tmp_path) -> None:
    """A node of no layer between the layers (a linear the roles did not place) takes
    the stage of its inputs: no node's stage is before the stages of its inputs."""
    from autosched.compiler.partition import Partition, stage_of

    graph = _unplaced(_graph("llama", tmp_path), "l0.q_proj")
    where = stage_of(graph, Partition.even(1, 2, 2))
    assert where["l0.q_proj"] == 0  # it reads layer 0's norm, and layer 0 reads it
    assert all(where[i] <= where[n.name] for n in graph for i in n.inputs)
    assert where["embed"] == 0 and where["lm_head"] == 1


def test_a_linear_the_roles_do_not_place_stays_on_one_device(tmp_path) -> None:
    from autosched.compiler.partition import Partition, check_placed

    graph = _unplaced(_graph("llama", tmp_path), "l1.q_proj")
    check_placed(graph, Partition.even(1, 1, 2))
    for tp, pp in ((1, 2), (2, 1)):
        with pytest.raises(AutoschedError, match="l1.q_proj: a linear outside the decoder"):
            check_placed(graph, Partition.even(tp, pp, 2))


def test_simulate_chooses_among_the_partitions_that_compute_the_step(tmp_path,
                                                                    capsys) -> None:
    """OLMo 2's whole-width q/k norms rule tensor parallelism out: ``simulate`` on a
    multi-device system with no ``--partition`` picks among the others."""
    from autosched.cli import main

    model = _graph_dir("olmo2", tmp_path)
    assert main(["simulate", "--model", str(model), "--hw", "hbm-pim-x16", "--context", "8",
                 "--db", "none", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["partition"]["tp"] == 1


def _graph_dir(model_type: str, folder):
    cfg = tiny_config(model_type)
    cfg.vocab_size = 128
    cfg.save_pretrained(folder)
    return folder / "config.json"
