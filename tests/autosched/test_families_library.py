"""The shipped library kernels as named points of each family's space: the point lowers to
exactly the library kernel, the tuner measures it first, ``schedules="library"`` compiles
a whole model on it, and that program still computes what torch computes."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autosched.api import compile_model, run_check
from autosched.database import open_database
from autosched.families import build, family_of
from autosched.families.registry import space_of
from autosched.measure import LocalRunner
from autosched.search import SearchContext, tune_tasks
from search_spaces import Schedule, Workload
from sim.hwio import load_hardware
from sim.kernels import elementwise, gemv
from sim.timing import simulate

PRESETS = ("hbm-pim", "aim-gddr6")


@settings(max_examples=6, deadline=None, derandomize=True)
@given(hw=st.sampled_from(PRESETS), n=st.integers(1, 3000), k=st.integers(1, 3000))
def test_gemv_library_point_is_the_shipped_kernel(hw: str, n: int, k: int) -> None:
    h = load_hardware(hw)
    w = Workload.make("gemv", m=1, n=n, k=k)
    low = family_of(w)
    point = low.library(w, h)
    assert point is not None and point["placement"] == "pim"
    low.space(w, h).check(point)
    space_of(w, h).check(point)  # the cached space the compiler and lookup use
    assert space_of(w, h) == low.space(w, h)
    ours = simulate(build(w, point, h).program, h)
    shipped = simulate(gemv(h, n, k, 1).program, h)
    assert (ours.latency_ns, ours.energy_pj) == (shipped.latency_ns, shipped.energy_pj)


@pytest.mark.parametrize("hw", PRESETS)
def test_elementwise_library_point_and_families_without_one(hw: str) -> None:
    h = load_hardware(hw)
    add = Workload.make("elementwise", attrs={"fn": "add"}, m=1, n=1000)
    assert family_of(add).library(add, h) == {"placement": "pim"}
    ours = simulate(build(add, {"placement": "pim"}, h).program, h).latency_ns
    assert ours == simulate(elementwise(h, 1000, "add").program, h).latency_ns
    for w in (Workload.make("rmsnorm", m=1, n=64),
              Workload.make("attention", b=1, q=1, h=2, kvh=1, d=16, l=32),
              Workload.make("elementwise", attrs={"fn": "silu_mul"}, m=1, n=64)):
        named = family_of(w).named_points(w, h)
        assert list(named) == ["default"]


def test_tuner_measures_the_library_kernel_first(tmp_path) -> None:
    h = load_hardware("hbm-pim")
    w = Workload.make("gemv", m=1, n=1024, k=1024)
    low = family_of(w)
    db = open_database(tmp_path / "t.db")
    with LocalRunner(1) as runner:
        res = tune_tasks([(w, 1)], SearchContext.of(hardware=h, database=db, runner=runner,
                                                    trials=2))
    keys = {m.schedule.key for m in db.records(workload=w)}
    space = low.space(w, h)
    named = {Schedule.of(space, p).key for p in low.named_points(w, h).values()}
    assert len(named) == 2 and keys == named
    lib = simulate(build(w, low.library(w, h), h).program, h).latency_ns
    assert res[0].best.latency_ns <= lib


@pytest.mark.parametrize("hw", PRESETS)
def test_library_program_uses_the_library_where_it_has_a_kernel(hw: str) -> None:
    cm = compile_model("llama-tiny", hw, schedules="library", context=8)
    kinds = {(n.workload.op, n.workload.attr("fn", "")): cm.choices[n.name].kind
             for n in cm.graph}
    assert kinds[("gemv", "")] == "library" and kinds[("attention", "")] == "default"
    assert kinds[("elementwise", "add")] == "library"


def test_library_program_matches_torch() -> None:
    assert run_check("llama-tiny", "aim-gddr6", steps=2, schedules="library").passed


def test_unknown_schedules_keyword_is_rejected() -> None:
    from sim.errors import AutoschedError

    with pytest.raises(AutoschedError, match="'library'"):
        compile_model("llama-tiny", "hbm-pim", schedules="handwritten", context=8)
