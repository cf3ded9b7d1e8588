"""``--routing FILE``: a routing file becomes each sparse layer's expert probabilities in
the model config, the step graph's moe workloads carry them (and the expected path
follows them), and every malformed file is refused naming what is wrong."""

from __future__ import annotations

import json

import numpy as np
import pytest

from autosched.families.moe import active_path
from autosched.frontend import ModelConfig, ModelError, get_model_config
from autosched.frontend.routed import read_routing, with_routing
from autosched.pipeline import step_graph, step_of
from experiments.archs import tiny_config

SKEW = [0.5, 0.2, 0.1, 0.1, 0.05, 0.05, 0.0, 0.0]


@pytest.fixture(scope="module")
def moe_cfg() -> ModelConfig:
    """A tiny Qwen3-MoE whose layer 0 is dense and layer 1 routes over 8 experts."""
    hf = tiny_config("qwen3_moe")
    hf.mlp_only_layers = [0]
    return get_model_config(hf)


def _file(tmp_path, data: object, name: str = "r.json"):
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


def test_one_list_holds_for_every_layer_and_listed_layers_for_theirs(tmp_path) -> None:
    e, rows = read_routing(_file(tmp_path, {"experts": 8, "probs": SKEW}), 3)
    assert e == 8 and rows == (tuple(SKEW),)
    e, rows = read_routing(_file(tmp_path, {"experts": 2, "layers": [2],
                                            "probs": [[0.25, 0.75]]}), 3)
    assert rows == ((), (), (0.25, 0.75))
    # without "layers", one list per layer of the model, in order (renormalised)
    e, rows = read_routing(_file(tmp_path, {"experts": 2, "probs": [[1, 0], [0.5, 0.5005]]}),
                           2)
    assert rows[0] == (1.0, 0.0) and sum(rows[1]) == pytest.approx(1.0, abs=1e-12)


@pytest.mark.parametrize("data, why", [
    ([0.5, 0.5], "an object"),
    ({"experts": True, "probs": [1.0]}, "positive integer"),
    ({"experts": 2, "probs": [0.5, 0.6]}, "sums to 1.1"),
    ({"experts": 2, "probs": [1.5, -0.5]}, "non-negative"),
    ({"experts": 2, "probs": [0.5, 0.25, 0.25]}, "list of 2"),
    ({"experts": 2, "probs": []}, "one list per layer"),
    ({"experts": 2, "probs": [[1, 0], [1, 0], [1, 0]]}, "say which with 'layers'"),
    ({"experts": 2, "layers": [0, 0], "probs": [[1, 0], [1, 0]]}, "distinct"),
    ({"experts": 2, "layers": [5], "probs": [[1, 0]]}, "among 0..1"),
    ({"experts": 2, "layers": [0], "probs": [[1, "x"]]}, "layer 0's probabilities"),
])
def test_a_malformed_routing_file_is_refused_naming_the_problem(tmp_path, data, why) -> None:
    with pytest.raises(ModelError, match=why):
        read_routing(_file(tmp_path, data), 2)


def test_a_routing_must_fit_the_model(tmp_path, moe_cfg) -> None:
    with pytest.raises(ModelError, match="4 experts, but .* 8"):
        with_routing(moe_cfg, _file(tmp_path, {"experts": 4, "probs": [0.25] * 4}))
    with pytest.raises(ModelError, match="no routed experts"):
        with_routing(get_model_config("llama-tiny"), _file(tmp_path, {"experts": 8,
                                                                      "probs": SKEW}))
    (tmp_path / "broken.json").write_text("{")
    with pytest.raises(ModelError, match="broken.json"):
        with_routing(moe_cfg, tmp_path / "broken.json")


def test_the_step_graph_carries_each_layers_routing(tmp_path, moe_cfg) -> None:
    cfg = with_routing(moe_cfg, _file(tmp_path, {"experts": 8, "layers": [1],
                                                 "probs": [SKEW]}))
    assert ModelConfig.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg
    assert cfg.subset((1,)).routing == (tuple(SKEW),)
    moes = [n for n in step_graph(step_of(cfg, batch=8)) if n.workload.op == "moe"]
    assert [n.layer for n in moes] == [1]
    w = moes[0].workload
    assert w.attr("route") == "0.5/0.2/0.1/0.1/0.05/0.05/0/0"
    # 8 rows x 2 experts each: the skewed path fills the popular experts, uniform spreads
    assert active_path(w).tolist() == [8, 3, 2, 1, 1, 1, 0, 0]
    plain = next(n for n in step_graph(step_of(moe_cfg, batch=8)) if n.workload.op == "moe")
    assert plain.workload.attr("route") is None
    assert np.array_equal(active_path(plain.workload), [2] * 8)
