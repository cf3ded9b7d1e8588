"""Every model kind honours the interface; the XGBoost models learn and round-trip."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cost_models import (
    CostModelError,
    XGBRankModel,
    XGBRegressionModel,
    evaluate,
    featurize,
    make_cost_model,
    relevance,
    task_key,
)
from cost_models.features import FEATURE_NAMES
from cost_models.xgb import meta_path


def test_before_fit_scores_by_the_bound(held_out) -> None:
    _, _, vc, _ = held_out
    bound = make_cost_model("bound").predict(vc)
    for kind in ("xgb-scratch", "xgb-rank"):  # "xgb" starts from the shipped trees instead
        pred = make_cost_model(kind).predict(vc)
        assert np.array_equal(np.argsort(pred, kind="stable"), np.argsort(bound, kind="stable"))


def test_regression_learns_held_out_workloads(held_out) -> None:
    tc, tl, vc, vl = held_out
    model = XGBRegressionModel(seed=0)
    model.fit(tc, tl)
    m = evaluate([task_key(c) for c in vc], vl, model.predict(vc))
    assert m["groups"] == 2 and m["pairwise"] > 0.9
    # it predicts log2 latency: close in absolute terms, not only in order
    err = np.abs(model.predict(vc) - np.log2(vl))
    assert np.median(err) < 0.5


def test_ranker_orders_held_out_workloads(held_out) -> None:
    tc, tl, vc, vl = held_out
    model = XGBRankModel(seed=0)
    model.fit(tc, tl)
    m = evaluate([task_key(c) for c in vc], vl, model.predict(vc))
    assert m["pairwise"] > 0.8


def test_relevance_labels() -> None:
    lat = np.array([5.0, 1.0, 3.0, 3.0, 9.0])
    rel = relevance(lat)
    assert rel.dtype.kind == "i" and rel.min() == 0 and rel.max() == 4
    assert rel[1] == 4 and rel[4] == 0 and rel[2] == rel[3]  # fastest highest, ties equal
    big = relevance(np.arange(100.0))
    assert big.max() == 31 and big.min() == 0  # rank:ndcg exponential gain needs < 32
    assert np.all(np.diff(big) <= 0)
    assert relevance([4.0]).tolist() == [0]


def test_ranker_groups_are_sorted_and_graded(held_out) -> None:
    tc, tl, _, _ = held_out
    order = np.random.default_rng(0).permutation(len(tc))  # interleave the tasks
    cs, ls = [tc[i] for i in order], tl[order]
    from cost_models.features import featurize

    dm = XGBRankModel()._dmatrix(featurize(cs), ls, [task_key(c) for c in cs])
    ptr = dm.get_uint_info("group_ptr")
    assert len(ptr) - 1 == len({task_key(c) for c in cs})
    labels = dm.get_label()
    assert np.all(labels == np.round(labels)) and labels.min() == 0 and labels.max() <= 31


def test_save_load_round_trip_and_warm_start(held_out, tmp_path: Path) -> None:
    tc, tl, vc, vl = held_out
    model = XGBRegressionModel(seed=1, n_estimators=40)
    model.fit(tc, tl)
    path = tmp_path / "m.ubj"
    model.save(path)
    assert meta_path(path).exists() and path.stat().st_size < 2_000_000
    loaded = make_cost_model(path)
    assert isinstance(loaded, XGBRegressionModel)
    assert np.array_equal(loaded.predict(vc), model.predict(vc))
    # refitting a loaded model adds refit_trees on top of it and leaves the base intact;
    # later fits add as many again, until max_trees were added: then from the base again
    n_base, step = loaded.base.num_boosted_rounds(), loaded.params["refit_trees"]
    loaded.params["max_trees"] = 2 * step
    grown = []
    for _ in range(3):
        loaded.fit(vc[:20], vl[:20])
        grown.append(loaded.booster.num_boosted_rounds() - n_base)
    assert grown == [step, 2 * step, step]
    assert loaded.base.num_boosted_rounds() == n_base


def test_freeze_makes_a_fitted_model_a_base(held_out) -> None:
    tc, tl, vc, vl = held_out
    model = XGBRegressionModel(seed=1, n_estimators=30)
    with pytest.raises(CostModelError, match="freeze"):
        model.freeze()
    model.fit(tc, tl)
    before = model.predict(vc)
    model.freeze()
    model.fit(vc[:10], vl[:10])  # local data adds trees to the transferred ones
    assert model.booster.num_boosted_rounds() == 30 + model.params["refit_trees"]
    assert model.base.num_boosted_rounds() == 30
    assert not np.array_equal(model.predict(vc), before)


def test_load_rejects_other_features(held_out, tmp_path: Path) -> None:
    tc, tl, _, _ = held_out
    model = XGBRankModel(n_estimators=5)
    model.fit(tc, tl)
    path = tmp_path / "r.ubj"
    model.save(path)
    with pytest.raises(CostModelError, match="holds a 'xgb-rank' model"):
        XGBRegressionModel.load(path)
    meta = meta_path(path)
    meta.write_text(meta.read_text().replace("log_bus_bytes", "renamed"))
    with pytest.raises(CostModelError, match="retrain"):
        XGBRankModel.load(path)


def test_regression_trees_learn_the_shortfall_from_the_bound(held_out, tmp_path: Path) -> None:
    tc, tl, vc, _ = held_out
    model = XGBRegressionModel(n_estimators=5)
    model.fit(tc, tl)
    x = featurize(vc)
    trees = model.booster.inplace_predict(x)
    assert np.allclose(model.predict(vc), x[:, FEATURE_NAMES.index("log_bound_ns")] + trees)
    path = tmp_path / "x.ubj"
    model.save(path)
    assert '"target": "log2_latency_over_bound"' in meta_path(path).read_text()
    meta = meta_path(path)  # a model saved before the target was named learnt log2 latency
    meta.write_text(meta.read_text().replace('"target": "log2_latency_over_bound",', ""))
    with pytest.raises(CostModelError, match="trained to predict log2_latency.*retrain"):
        XGBRegressionModel.load(path)


def test_fit_errors_and_too_little_data(held_out) -> None:
    tc, tl, _, _ = held_out
    model = XGBRegressionModel()
    with pytest.raises(CostModelError, match="one each"):
        model.fit(tc[:3], tl[:2])
    model.fit(tc[:2], [np.inf, 5.0])  # one usable measurement: stays on the bound
    assert model.booster is None
    with pytest.raises(CostModelError, match="fit"):
        model.save("unused.ubj")
