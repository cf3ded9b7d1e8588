"""The fusion-plan space: booleans, three conditionals, 108 plans."""

from __future__ import annotations

import pytest

from search_spaces import ScheduleError
from search_spaces.fusion import FULL_FUSION, NO_FUSION, fusion_default, fusion_space


def test_space_has_108_plans_and_the_extremes():
    plans = list(fusion_space().enumerate())
    assert len(plans) == 108 == fusion_space().size()
    assert NO_FUSION in plans and FULL_FUSION in plans
    assert all(("silu_mul_epilogue" in p) == p["merge_gate_up"] for p in plans)
    assert all(("rope_epilogue" in p) == p["merge_qkv"] for p in plans)
    assert all(("norm_epilogue" in p) == p["residual_epilogue"] for p in plans)


def test_default_is_full_fusion_and_valid():
    fusion_space().check(fusion_default())
    assert fusion_default() == FULL_FUSION


def test_silu_mul_epilogue_needs_merged_gate_up():
    bad = {**NO_FUSION, "silu_mul_epilogue": True}
    with pytest.raises(ScheduleError, match="inactive"):
        fusion_space().check(bad)


def test_plans_are_booleans_not_ints():
    with pytest.raises(ScheduleError, match="outside"):
        fusion_space().check({**NO_FUSION, "merge_qkv": 1})


def test_plans_recorded_before_a_decision_existed_read_it_as_off():
    from search_spaces.fusion import upgrade_plan

    old = {k: v for k, v in FULL_FUSION.items() if k != "argmax_epilogue"}
    fusion_space().check(upgrade_plan(old))
    assert upgrade_plan(old) == {**FULL_FUSION, "argmax_epilogue": False}
    assert upgrade_plan(FULL_FUSION) == FULL_FUSION
