"""make_cost_model: kinds, instances, saved files, the shipped model, helpful errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cost_models import (
    KINDS,
    BoundModel,
    ConstantModel,
    CostModelError,
    RandomModel,
    XGBRankModel,
    XGBRegressionModel,
    evaluate,
    make_cost_model,
    pretrained,
    task_key,
)
from cost_models.registry import PRETRAINED_DIR


def test_kinds_make_the_right_class() -> None:
    want = {"xgb": XGBRegressionModel, "xgb-scratch": XGBRegressionModel,
            "xgb-rank": XGBRankModel, "bound": BoundModel,
            "random": RandomModel, "none": ConstantModel}
    for kind, cls in want.items():
        assert type(make_cost_model(kind)) is cls and kind in KINDS
    assert make_cost_model("xgb").base is not None  # transfer: the shipped trees
    assert make_cost_model("xgb", seed=7).params["seed"] == 7
    assert make_cost_model("xgb-scratch").base is None
    m = RandomModel(seed=4)
    assert make_cost_model(m) is m
    assert make_cost_model("random", seed=9).seed == 9


def test_unknown_kind_says_what_exists() -> None:
    with pytest.raises(CostModelError, match="xgb-rank"):
        make_cost_model("gbdt")
    with pytest.raises(CostModelError, match="no pretrained cost model 'nope'"):
        pretrained("nope")
    with pytest.raises(CostModelError, match="no cost model file"):
        make_cost_model(Path("/nonexistent/model.ubj"))
    with pytest.raises(CostModelError, match="no cost model file"):
        make_cost_model("/nonexistent/model.ubj")  # a path given as a string


def test_saved_baselines_load_by_path(tmp_path: Path, held_out) -> None:
    _, _, vc, _ = held_out
    for model in (RandomModel(seed=5), BoundModel(), ConstantModel()):
        path = tmp_path / f"{model.name}.json"
        model.save(path)
        again = make_cost_model(str(path))
        assert type(again) is type(model)
        assert np.array_equal(again.predict(vc), model.predict(vc))
    (tmp_path / "junk.json").write_text('{"kind": "oracle"}')
    with pytest.raises(CostModelError, match="not a saved cost model"):
        make_cost_model(tmp_path / "junk.json")


def test_random_is_reproducible_and_seeded(held_out) -> None:
    _, _, vc, _ = held_out
    a, b = RandomModel(seed=1), RandomModel(seed=2)
    assert np.array_equal(a.predict(vc), a.predict(vc[::-1])[::-1])  # order-independent
    assert not np.array_equal(a.predict(vc), b.predict(vc))
    assert np.all((a.predict(vc) >= 0) & (a.predict(vc) < 1))


def test_shipped_model_ranks_unseen_tasks(held_out) -> None:
    """The pretrained model (other workloads, both presets) orders fresh GEMV tasks."""
    assert (PRETRAINED_DIR / "default.ubj").stat().st_size < 2_000_000
    model = pretrained()
    _, _, vc, vl = held_out
    m = evaluate([task_key(c) for c in vc], vl, model.predict(vc))
    assert m["pairwise"] > 0.85
