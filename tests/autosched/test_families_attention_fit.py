"""Fitting the KV cache: the compact layout search behind an overflowing memory plan."""

from __future__ import annotations

from autosched.families.attention.fit import compact_schedule
from autosched.families.registry import family_of
from search_spaces import Workload
from search_spaces.attention import cache_rows
from search_spaces.attention.geometry import attention_shape
from search_spaces.attention.space import capacity_of
from sim.hwio import load_hardware

HW = load_hardware("hbm-pim")
# one layer of llama2-7b decode at batch 4, context 1024: the default layout uses one bank
# of each unit's pair, twice the rows of the densest layout
W = Workload.make("attention", "fp16", {}, b=4, q=1, h=32, kvh=32, d=128, l=1024)


def _rows(point: dict) -> int:
    return cache_rows(attention_shape(W.dims, capacity_of(W), HW), point)


def test_compact_schedule_fits_the_rows_given() -> None:
    space = family_of(W).space(W, HW)
    least = min(_rows(p) for p in space.enumerate())
    default = _rows(family_of(W).default(W, HW))
    assert least < default  # the case the search exists for
    s = compact_schedule(W, HW, least)
    assert s is not None and _rows(s.point) <= least
    assert not space.validate(s.point)  # a point of the space, valid
    assert compact_schedule(W, HW, least - 1) is None


def test_compact_schedule_with_room_keeps_a_layout_within_it() -> None:
    roomy = _rows(family_of(W).default(W, HW))
    s = compact_schedule(W, HW, roomy)
    assert s is not None and _rows(s.point) <= roomy
