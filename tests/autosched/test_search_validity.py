"""Invalid proposals teach constrained samplers; ranking keeps the model's best and explores;
random valid points join the ranked proposals."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from optuna.trial import TrialState

from autosched.families.registry import FAMILIES
from autosched.measure import LocalRunner
from autosched.search import TaskTuner, learns_validity, make_sampler
from autosched.search.ranking import select
from cost_models.base import CostModel
from search_spaces import Workload
from sim.hwio import load_hardware

try:
    from .search_fakes import FakeGemvLowering, context
except ImportError:
    from search_fakes import FakeGemvLowering, context

GEMV = Workload.make("gemv", m=1, n=64, k=256)
HBM = load_hardware("hbm-pim")  # the real GEMV space: most of its points violate a constraint


@pytest.fixture
def runner():
    with LocalRunner(1) as r:
        yield r


@pytest.mark.parametrize(("kind", "learns"), [("tpe", True), ("motpe", True), ("nsga2", True),
                                              ("random", False), ("cmaes", False)])
def test_which_samplers_learn_validity(kind: str, learns: bool) -> None:
    assert learns_validity(make_sampler(kind, 0)) is learns


@pytest.mark.parametrize("sampler", ["tpe", "random"])
def test_invalid_points_are_told_by_sampler_kind(tmp_path: Path, runner: LocalRunner,
                                                 sampler: str) -> None:
    t = TaskTuner(GEMV, 1, context(HBM, tmp_path / "t.db", runner, strategy=sampler, seed=0))
    t.step(4)
    t.step(4)
    invalid = [tr for tr in t.strategy.study.trials if tr.user_attrs.get("skip") == "invalid"]
    assert invalid, "the real GEMV space should reject some asked points"
    for tr in invalid:
        assert t.space.validate(tr.params) or t.pool.candidate(tr.params) is None
        if sampler == "tpe":
            assert tr.state == TrialState.COMPLETE and tr.values == [math.inf]
            assert tr.constraints == {"valid": pytest.approx(tr.constraints["valid"])}
            assert tr.constraints["valid"] >= 1
        else:
            assert tr.state == TrialState.FAIL
    measured = [tr for tr in t.strategy.study.trials if not tr.user_attrs.get("skip")]
    assert len(measured) == t.measured == 8
    assert all(not tr.constraints and math.isfinite(tr.value) for tr in measured
               if tr.state == TrialState.COMPLETE)


class OnePoint(CostModel):
    """Scores one chosen point 0 and every other 1."""

    name = "one-point"

    def __init__(self, point: dict) -> None:
        self.point = point

    def fit(self, candidates, latencies_ns) -> None:
        pass

    def predict(self, candidates) -> np.ndarray:
        return np.array([0.0 if c.point_dict == self.point else 1.0 for c in candidates])

    def save(self, path) -> None:
        Path(path).write_text(json.dumps(self.point))

    @classmethod
    def load(cls, path) -> OnePoint:
        return cls(json.loads(Path(path).read_text()))


def test_random_valid_points_join_the_ranked_proposals(tmp_path: Path, runner: LocalRunner,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(FAMILIES, "gemv", FakeGemvLowering())
    hw = load_hardware("aim-gddr6")
    w = Workload.make("gemv", m=1, n=64, k=256)
    model = OnePoint({})
    t = TaskTuner(w, 1, context(hw, tmp_path / "t.db", runner, strategy="tpe", seed=0,
                                cost_model=model))
    # the last buildable point in enumeration order: one the sampler is unlikely to ask first
    target = next(p for p in reversed(list(t.space.enumerate()))
                  if t.pool.candidate(p) is not None)
    model.point = target
    got = t.step(3, n_explore=0)
    assert got[0].schedule == t.default and got[1].schedule.point == target
    picked = [tr for tr in t.strategy.study.trials if tr.params == target]
    assert len(picked) == 1 and picked[0].state == TrialState.COMPLETE  # told like any other


class ByIndex(CostModel):
    """Scores a candidate by the number it carries (stands in for a real model)."""

    name = "by-index"

    def fit(self, candidates, latencies_ns) -> None:
        pass

    def predict(self, candidates) -> np.ndarray:
        return np.asarray(candidates, dtype=float)

    def save(self, path) -> None:
        Path(path).write_text(self.name)

    @classmethod
    def load(cls, path) -> ByIndex:
        return cls()


def test_select_orders_first_top_then_explore() -> None:
    keys = [f"k{i}" for i in range(10)]
    scores = [9, 8, 7, 6, 5, 4, 3, 2, 1, 0]  # k9 predicted fastest
    rng = np.random.default_rng(0)
    assert select(keys, scores, None, 3, 1, first=["k5"], rng=rng) == (["k5", "k0", "k1"], {})
    chosen, ranked = select(keys, scores, ByIndex(), 4, 0, first=["k5", "absent"], rng=rng)
    assert chosen == ["k5", "k9", "k8", "k7"]
    assert ranked == {k: float(v) for k, v in zip(keys, scores, strict=True) if k != "k5"}
    out, _ = select(keys, scores, ByIndex(), 5, 2, first=[], rng=np.random.default_rng(1))
    assert out[:3] == ["k9", "k8", "k7"] and len(set(out)) == 5
    assert set(out[3:]) <= set(keys[:7])
    assert out == select(keys, scores, ByIndex(), 5, 2, first=[], rng=np.random.default_rng(1))[0]
    assert select(keys[:2], scores[:2], ByIndex(), 5, 2, rng=rng)[0] == ["k0", "k1"]
    assert select([], [], ByIndex(), 3, 1, rng=rng) == ([], {})
