"""Point-wise spaces: placement domains follow the device and the workload."""

from __future__ import annotations

import pytest

from search_spaces import SpaceError, Workload
from search_spaces.pointwise import (
    pim_unavailable,
    pointwise_default,
    pointwise_space,
)
from sim.hwio import load_hardware

HW = {name: load_hardware(name) for name in ("hbm-pim", "aim-gddr6")}


def _ew(fn: str, m: int = 1, n: int = 256) -> Workload:
    return Workload.make("elementwise", attrs={"fn": fn}, m=m, n=n)


@pytest.mark.parametrize("hw", HW.values(), ids=HW.keys())
@pytest.mark.parametrize("fn", ["add", "mul"])
def test_binary_elementwise_offers_pim(hw, fn):
    space = pointwise_space(_ew(fn), hw)
    assert space.param("placement").domain.values() == ("host", "pim")
    assert pim_unavailable(_ew(fn), hw) is None


@pytest.mark.parametrize("hw", HW.values(), ids=HW.keys())
@pytest.mark.parametrize("fn", ["silu", "silu_mul"])
def test_activations_the_banks_lack_stay_on_the_host(hw, fn):
    space = pointwise_space(_ew(fn), hw)
    assert list(space.enumerate()) == [{"placement": "host"}]
    assert "computes no" in pim_unavailable(_ew(fn), hw)


@pytest.mark.parametrize("wl", [
    Workload.make("rmsnorm", m=1, n=256), Workload.make("rope", m=2, h=12, d=32),
    Workload.make("embedding", m=1, n=256, v=4096), Workload.make("argmax", m=1, n=4096),
], ids=lambda w: w.op)
def test_other_families_are_host_only(wl):
    for hw in HW.values():
        space = pointwise_space(wl, hw)
        assert space.name == wl.op
        assert list(space.enumerate()) == [{"placement": "host"}]
        assert "host only" in pim_unavailable(wl, hw)


def test_pim_is_dropped_when_operands_overflow_the_rows():
    hw = HW["aim-gddr6"]
    per_row = hw.org.channels * hw.org.banks_per_channel * hw.columns_per_row // 2 * hw.pim.lanes
    fits = _ew("add", m=1, n=per_row * hw.org.rows_per_bank)
    too_big = _ew("add", m=2, n=per_row * hw.org.rows_per_bank // 2 + 1)
    assert "pim" in pointwise_space(fits, hw).param("placement").domain.values()
    assert pointwise_space(too_big, hw).param("placement").domain.values() == ("host",)
    assert "rows per bank" in pim_unavailable(too_big, hw)


def test_defaults_are_valid_points():
    for hw in HW.values():
        for wl in (_ew("add"), _ew("silu"), Workload.make("rmsnorm", m=3, n=64)):
            pointwise_space(wl, hw).check(pointwise_default(wl, hw))


def test_bad_workloads_are_rejected_with_the_fix():
    hw = HW["hbm-pim"]
    with pytest.raises(SpaceError, match="needs attr fn"):
        pointwise_space(Workload.make("elementwise", m=1, n=8), hw)
    with pytest.raises(SpaceError, match="even head dim"):
        pointwise_space(Workload.make("rope", m=1, h=2, d=7), hw)
    with pytest.raises(SpaceError, match="not a point-wise family"):
        pointwise_space(Workload.make("gemv", m=1, n=8, k=8), hw)
