"""The fusion-plan space: booleans, three conditionals, 54 plans."""

from __future__ import annotations

import pytest

from search_spaces import ScheduleError
from search_spaces.fusion import FULL_FUSION, NO_FUSION, fusion_default, fusion_space


def test_space_has_54_plans_and_the_extremes():
    plans = list(fusion_space().enumerate())
    assert len(plans) == 54 == fusion_space().size()
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
