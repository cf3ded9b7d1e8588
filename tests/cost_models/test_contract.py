"""The cost-model contract: every kind the registry makes honours it (one test per promise)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cost_models import KINDS, make_cost_model

pytestmark = pytest.mark.parametrize("kind", KINDS)


def test_predicts_before_any_fit(kind: str, held_out) -> None:
    _, _, vc, _ = held_out
    pred = np.asarray(make_cost_model(kind, seed=3).predict(vc))
    assert pred.shape == (len(vc),) and np.all(np.isfinite(pred))


def test_predicts_nothing_for_no_candidates(kind: str) -> None:
    assert np.asarray(make_cost_model(kind, seed=3).predict([])).shape == (0,)


def test_skips_failed_measurements_and_refits(kind: str, held_out) -> None:
    tc, tl, vc, _ = held_out
    lat = np.array(tl, dtype=float)
    lat[0] = np.inf  # a failed measurement is skipped, not fatal
    model = make_cost_model(kind, seed=3)
    model.fit(tc, lat)
    model.fit(tc, lat)  # refit with everything again
    pred = np.asarray(model.predict(vc))
    assert pred.shape == (len(vc),) and np.all(np.isfinite(pred))


def test_save_load_round_trip(kind: str, held_out, tmp_path: Path) -> None:
    tc, tl, vc, _ = held_out
    model = make_cost_model(kind, seed=3)
    model.fit(tc, tl)
    path = tmp_path / f"{model.name}.ubj"
    model.save(path)
    again = type(model).load(path)
    assert np.array_equal(np.asarray(again.predict(vc)), np.asarray(model.predict(vc)))


def test_same_seed_same_predictions(kind: str, held_out) -> None:
    tc, tl, vc, _ = held_out
    a, b = make_cost_model(kind, seed=5), make_cost_model(kind, seed=5)
    a.fit(tc, tl)
    b.fit(tc, tl)
    assert np.array_equal(np.asarray(a.predict(vc)), np.asarray(b.predict(vc)))
