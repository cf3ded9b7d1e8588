"""The layernorm family, added as docs/adding-an-operator.md walks through: its space, its
kernel against numpy, its bound, and a model that uses it, compiled, tuned and run."""

from __future__ import annotations

import numpy as np
import pytest

from autosched.api import compile_model, run_check
from autosched.families import build, family_of
from autosched.frontend import ModelConfig
from autosched.tune import tune
from search_spaces import Workload
from sim.hwio import load_hardware
from sim.timing import simulate

LN = ModelConfig("llama", hidden=96, intermediate=160, layers=2, heads=4, kv_heads=2,
                 head_dim=32, vocab=211, max_positions=32, norm="layer", name="ln-test")


def test_space_is_the_host_op_and_the_bound_holds() -> None:
    hw = load_hardware("hbm-pim")
    w = Workload.make("layernorm", attrs={"eps": 1e-5}, m=3, n=96)
    low = family_of(w)
    assert list(low.space(w, hw).enumerate()) == [{"placement": "host"}]
    k = build(w, None, hw)
    assert simulate(k.program, hw).latency_ns >= low.bound(w, hw) > 0


def test_kernel_matches_numpy() -> None:
    hw = load_hardware("aim-gddr6")
    rng = np.random.default_rng(0)
    x, g, b = rng.normal(size=(3, 96)), rng.normal(size=96), rng.normal(size=96)
    w = Workload.make("layernorm", attrs={"eps": 1e-5}, m=3, n=96)
    y = build(w, None, hw).run(hw, {"x": x, "w": g, "b": b})
    mu, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    np.testing.assert_allclose(y, (x - mu) / np.sqrt(var + 1e-5) * g + b, rtol=1e-4,
                               atol=1e-5)


def test_model_captures_layernorm_nodes() -> None:
    """Unfused, every norm is a layernorm node; under the default fusion plan each norm of
    a residual sum is appended by the linear that adds it, the first block's by the
    embedding."""
    cm = compile_model(LN, "hbm-pim", context=8, fusion={})
    ops = [n.workload.op for n in cm.graph]
    assert ops.count("layernorm") == 2 * LN.layers + 1 and "rmsnorm" not in ops
    fused = compile_model(LN, "hbm-pim", context=8).graph
    assert [n.workload.op for n in fused].count("layernorm") == 0
    assert fused.by_role("embed")[0].workload.attr("epilogue") == "layernorm"
    assert [n.workload.attr("epilogue") for n in fused].count("add_layernorm") == 2 * LN.layers


@pytest.mark.parametrize("hw", ["hbm-pim", "aim-gddr6"])
def test_model_generation_matches_torch(hw: str) -> None:
    rep = run_check(LN, hw, steps=3)
    assert rep.passed, rep.to_dict()


def test_model_tunes(tmp_path) -> None:
    rep = tune(LN, hw="aim-gddr6", context=8, trials=16, workers=1, cost_model="none",
               db=tmp_path / "t.db")
    ln = [t for t in rep.tasks if t.workload.op == "layernorm"]
    assert ln and all(t.measurements == 1 and t.tuned_ns == t.default_ns for t in ln)
    assert rep.end_to_end.tuned_ns <= rep.end_to_end.default_ns
