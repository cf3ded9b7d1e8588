"""A deep model's step graph from a two-layer capture equals the full capture."""

from __future__ import annotations

import dataclasses

import pytest

from autosched.compiler.repeat import stacked_graph
from autosched.frontend import get_model_config, model_graph
from search_spaces.fusion import FULL_FUSION


@pytest.mark.parametrize("phase, fusion", [("decode", None), ("prefill", {}),
                                           ("decode", FULL_FUSION), ("prefill", FULL_FUSION)])
def test_stacked_graph_is_the_full_capture(phase, fusion) -> None:
    """Node for node: names, workloads, wiring, layers, roles and the parameter names
    (layer i reads layer i's weights, not layer 1's), fused or not (only the last layer's
    down projection absorbs the final norm)."""
    cfg = dataclasses.replace(get_model_config("llama-tiny"), layers=4)
    kw = dict(phase=phase, batch=1, context=16, fusion=fusion)
    _, full = model_graph(cfg, **kw)
    _, stacked = stacked_graph(cfg, **kw)
    assert [n.to_dict() for n in stacked.nodes] == [n.to_dict() for n in full.nodes]
    assert any("3" in p for n in stacked.nodes if n.layer == 3 for _, p in n.params)
