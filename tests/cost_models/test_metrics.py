"""Ranking metrics on hand-made cases."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cost_models import (
    CostModelError,
    evaluate,
    pairwise_accuracy,
    spearman,
    topk_recall,
    topk_score,
)
from cost_models.metrics import rankdata

TRUE = [10.0, 20.0, 30.0, 40.0, 50.0]


def test_pairwise_perfect_and_reversed() -> None:
    assert pairwise_accuracy(TRUE, [1, 2, 3, 4, 5]) == 1.0
    assert pairwise_accuracy(TRUE, [5, 4, 3, 2, 1]) == 0.0
    # a monotone transform of the truth is a perfect order
    assert pairwise_accuracy(TRUE, np.log(TRUE)) == 1.0


def test_pairwise_counts_ties_as_half_and_skips_true_ties() -> None:
    assert pairwise_accuracy([1.0, 2.0], [3.0, 3.0]) == 0.5
    # the tied true pair (0, 1) is not counted; (0,2) and (1,2) right, nothing wrong
    assert pairwise_accuracy([1.0, 1.0, 2.0], [5.0, 0.0, 9.0]) == 1.0
    # one of three pairs wrong
    assert pairwise_accuracy([1.0, 2.0, 3.0], [1.0, 3.0, 2.0]) == pytest.approx(2 / 3)


def test_spearman_known_values() -> None:
    assert spearman(TRUE, [1, 2, 3, 4, 5]) == pytest.approx(1.0)
    assert spearman(TRUE, [5, 4, 3, 2, 1]) == pytest.approx(-1.0)
    # d = (0, 0, 1, 1, 0) after swapping ranks 3, 4: 1 - 6 * 2 / (5 * 24) = 0.9
    assert spearman(TRUE, [1, 2, 4, 3, 5]) == pytest.approx(0.9)
    assert spearman(TRUE, [7, 7, 7, 7, 7]) == 0.0


def test_rankdata_averages_ties() -> None:
    assert rankdata([3.0, 1.0, 3.0, 2.0]).tolist() == [3.5, 1.0, 3.5, 2.0]


def test_topk() -> None:
    pred = [3.0, 1.0, 2.0, 5.0, 4.0]  # picks indices 1, 2, then 0
    assert topk_recall(TRUE, pred, 1) == 0.0
    assert topk_recall(TRUE, pred, 2) == 0.5
    assert topk_recall(TRUE, pred, 3) == 1.0
    assert topk_score(TRUE, pred, 1) == pytest.approx(10 / 20)
    assert topk_score(TRUE, pred, 3) == 1.0
    assert topk_score(TRUE, TRUE, 1) == 1.0
    with pytest.raises(CostModelError):
        topk_score([], [], 1)


def test_evaluate_averages_groups_and_drops_failures() -> None:
    groups = ["a"] * 3 + ["b"] * 3 + ["c"]
    true = [1.0, 2.0, 3.0, 1.0, 2.0, np.inf, 5.0]
    pred = [1.0, 2.0, 3.0, 2.0, 1.0, 0.0, 1.0]
    out = evaluate(groups, true, pred, k=1)
    assert out["groups"] == 2.0  # "c" has one measurement, "b" loses its inf
    assert out["pairwise"] == pytest.approx(0.5)
    assert out["recall@1"] == pytest.approx(0.5)
    with pytest.raises(CostModelError):
        evaluate(["a"], [1.0, 2.0], [1.0, 2.0])


@settings(max_examples=30, deadline=None)
@given(st.lists(st.floats(1, 1e6), min_size=2, max_size=20, unique=True))
def test_metrics_invariants(xs: list[float]) -> None:
    t = np.asarray(xs)
    assert pairwise_accuracy(t, t) == 1.0
    assert pairwise_accuracy(t, -t) == 0.0
    assert spearman(t, t) == pytest.approx(1.0)
    assert pairwise_accuracy(t, np.zeros_like(t)) == 0.5
    assert 0 < topk_score(t, -t, 1) <= 1.0
