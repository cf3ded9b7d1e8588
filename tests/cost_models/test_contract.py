"""The cost-model contract: every kind the registry makes honours it (one test per promise)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cost_models import KINDS, make_cost_model

pytestmark = pytest.mark.parametrize("kind", KINDS)
SMALL = 64  # training candidates: the contract is about behaviour, not accuracy


@pytest.fixture
def data(held_out):
    """(train candidates, latencies, test candidates): a small slice of the shared data."""
    tc, tl, vc, _ = held_out
    return tc[:SMALL], tl[:SMALL], vc[:SMALL]


def test_predicts_before_any_fit(kind: str, data) -> None:
    _, _, vc = data
    pred = np.asarray(make_cost_model(kind, seed=3).predict(vc))
    assert pred.shape == (len(vc),) and np.all(np.isfinite(pred))


def test_predicts_nothing_for_no_candidates(kind: str) -> None:
    assert np.asarray(make_cost_model(kind, seed=3).predict([])).shape == (0,)


def test_skips_failed_measurements_and_refits(kind: str, data) -> None:
    tc, tl, vc = data
    lat = np.array(tl, dtype=float)
    lat[0] = np.inf  # a failed measurement is skipped, not fatal
    model = make_cost_model(kind, seed=3)
    model.fit(tc, lat)
    model.fit(tc, lat)  # refit with everything again
    pred = np.asarray(model.predict(vc))
    assert pred.shape == (len(vc),) and np.all(np.isfinite(pred))


def test_save_load_round_trip(kind: str, data, tmp_path: Path) -> None:
    tc, tl, vc = data
    model = make_cost_model(kind, seed=3)
    model.fit(tc, tl)
    path = tmp_path / f"{model.name}.ubj"
    model.save(path)
    again = type(model).load(path)
    assert np.array_equal(np.asarray(again.predict(vc)), np.asarray(model.predict(vc)))


def test_same_seed_same_predictions(kind: str, data) -> None:
    tc, tl, vc = data
    a, b = make_cost_model(kind, seed=5), make_cost_model(kind, seed=5)
    a.fit(tc, tl)
    b.fit(tc, tl)
    assert np.array_equal(np.asarray(a.predict(vc)), np.asarray(b.predict(vc)))
