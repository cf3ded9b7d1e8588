"""The attention space: valid defaults, ctx-independent domains, hardware constraints,
padded head dims stated in the schedule, sliding windows bounding the cache."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from search_spaces import Workload
from search_spaces.attention import (
    attention_default,
    attention_space,
    cache_rows,
    qrow_options,
    shape_of,
)
from sim.errors import AutoschedError
from sim.hwio import load_hardware

HW = [load_hardware(n) for n in ("hbm-pim", "aim-gddr6")]


def wl(ctx: int, **kw: int) -> Workload:
    dims = {"b": 1, "q": 1, "h": 32, "kvh": 8, "d": 128, "l": ctx, **kw}
    return Workload.make("attention", attrs={"capacity": 1024}, **dims)


@pytest.mark.parametrize("hw", HW, ids=lambda h: h.name)
def test_default_is_valid_and_uses_pim(hw) -> None:
    w = wl(1024)
    point = attention_default(w, hw)
    assert attention_space(w, hw).validate(point) == []
    assert point["scores"] == "pim" and point["wsum"] == "pim"
    assert point["kv_channels"] * point["seq_split"] == hw.org.channels


@pytest.mark.parametrize("hw", HW, ids=lambda h: h.name)
def test_space_does_not_depend_on_l(hw) -> None:
    assert len({attention_space(wl(n), hw).digest for n in (1, 7, 97, 1024)}) == 1


def test_dot_mode_only_with_an_adder_tree() -> None:
    hbm, aim = HW
    assert attention_space(wl(8), hbm).param("k_mode").domain.values() == ("lane",)
    assert "dot" in attention_space(wl(8), aim).param("k_mode").domain.values()


def test_global_buffer_and_registers_bound_query_rows() -> None:
    """Registers bound the query rows; a global buffer smaller than the rows' heads only
    splits the query into parts (whole columns each), the K pass loading part by part
    with register sets of whole rows."""
    from search_spaces.attention import attention_layout_of, capacity_of

    hbm = HW[0]  # 128-element global buffer: one query row of d=128
    w = wl(8)
    space = attention_space(w, hbm)
    point = {"kv_channels": 8, "seq_split": 8, "scores": "pim", "k_mode": "lane",
             "k_regs": 8, "k_qrows": 2, "wsum": "host"}
    reasons = " ".join(space.validate(point))
    assert "k_registers" in reasons and "k_buffer" not in reasons
    two = {**point, "k_regs": 4}
    assert space.validate(two) == []
    assert attention_layout_of(w.dims, capacity_of(w), two, hbm).qpart == 64
    lone = {**point, "k_regs": 1, "seq_split": 1}  # one-position sets within a row of several
    assert any(r.startswith("k_parts") for r in space.validate(lone))


def test_qrow_options() -> None:
    assert qrow_options(4, 1) == (1, 2, 4)
    assert qrow_options(2, 3) == (1, 2, 6)


@pytest.mark.parametrize("hw", HW, ids=lambda h: h.name)
def test_samples_are_valid(hw) -> None:
    space = attention_space(wl(5, q=5, b=2), hw)
    for p in space.sample(np.random.default_rng(0), 20):
        assert space.validate(p) == []


def test_unsupported_shapes_raise() -> None:
    with pytest.raises(AutoschedError, match="head dim"):
        attention_space(wl(8, d=1040, h=8, kvh=8), HW[0])  # wider than a row
    big = Workload.make("attention", attrs={"capacity": 4}, b=1, q=1, h=2, kvh=1, d=32, l=8)
    with pytest.raises(AutoschedError, match="capacity"):
        attention_space(big, HW[0])


def test_constraints_are_the_geometry_rules() -> None:
    """By construction: one space rule per attention rule, nothing else."""
    from search_spaces import Rule
    from search_spaces.attention.rules import ATTN_RULES

    space = attention_space(wl(64), HW[0])
    assert all(isinstance(c, Rule) for c in space.constraints)
    assert [c.name for c in space.constraints] == [r.name for r in ATTN_RULES]


SMALL = [replace(h, org=replace(h.org, rows_per_bank=16)) for h in HW]


@pytest.mark.parametrize("hw", HW + SMALL, ids=lambda h: f"{h.name}-{h.org.rows_per_bank}rows")
@pytest.mark.parametrize("dims", [dict(h=32, kvh=8, d=128), dict(b=4, q=3, h=6, kvh=2, d=64),
                                  dict(h=4, kvh=4, d=16)])
def test_space_and_planner_accept_the_same_points(hw, dims) -> None:
    """A point drawn from the domains (constraints ignored) is valid in the space exactly
    when the code generator's planner resolves it."""
    from search_spaces.attention import attention_layout_of, capacity_of

    w = wl(200, **dims)
    space, rng = attention_space(w, hw), np.random.default_rng(len(str(dims)))
    seen = {True: 0, False: 0}
    for _ in range(400):
        pt: dict = {}
        for p in space.params:
            if p.when is None or p.when.holds(pt.get(p.when.param)):
                pt[p.name] = p.domain.values()[int(rng.integers(len(p.domain)))]
        ok_space = not space.validate(pt)
        try:
            attention_layout_of(w.dims, capacity_of(w), pt, hw)
            ok_plan = True
        except AutoschedError:
            ok_plan = False
        assert ok_space == ok_plan, (pt, space.validate(pt))
        seen[ok_space] += 1
    assert seen[True] and seen[False], seen


@pytest.mark.parametrize("hw", HW, ids=lambda h: h.name)
@pytest.mark.parametrize("d, dk", [(80, 80), (96, 96), (100, 112), (18, 32), (6, 16)])
def test_padded_head_dims_say_so_in_the_schedule(hw, d: int, dk: int) -> None:
    w = wl(8, d=d, h=6, kvh=2)
    space, point = attention_space(w, hw), attention_default(w, hw)
    assert point["head_pad"] == dk and space.validate(point) == []
    units = space.param("v_units").domain.values()
    assert point["v_units"] == max(units) and hw.units_per_channel % point["v_units"] == 0
    assert "head_pad" not in {p.name for p in attention_space(wl(8, d=64), hw).params}


@pytest.mark.parametrize("hw", HW, ids=lambda h: h.name)
def test_window_bounds_the_decode_cache(hw) -> None:
    def rows(cap: int, window: int, q: int = 1) -> int:
        w = Workload.make("attention", attrs={"capacity": cap, "window": window}, b=1, q=q,
                          h=8, kvh=2, d=64, l=q)
        return cache_rows(shape_of(w, hw), attention_default(w, hw))

    assert shape_of(Workload.make("attention", attrs={"capacity": 4096, "window": 512},
                                  b=1, q=1, h=8, kvh=2, d=64, l=1), hw).span == 512
    assert rows(32768, 512) == rows(512, 0) < rows(32768, 0)
    assert rows(64, 512) == rows(64, 0)  # a window wider than the cache changes nothing
    assert rows(64, 16, q=64) == rows(64, 0, q=64)  # prefill keeps every prompt position
