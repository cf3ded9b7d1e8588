"""Regression cases on a system of several devices (``autosched.regress.runner``)."""

from __future__ import annotations

from autosched.api import simulate_model
from autosched.regress import ModelCase, Runner
from autosched.regress.suites import SYSTEM_PRESETS, get_suite
from sim.system import load_system


def test_system_presets_are_told_from_devices() -> None:
    assert all(load_system(hw).devices > 1 for hw in SYSTEM_PRESETS)
    assert load_system("hbm-pim").devices == load_system("aim-gddr6").devices == 1


def test_a_system_case_is_the_simulate_figures_of_its_step() -> None:
    case = ModelCase("llama-tiny", "aim-gddr6-x16", context=16)
    res = Runner(repeats=2).run(case)
    want = simulate_model("llama-tiny", "aim-gddr6-x16", context=16, fusion={},
                          baseline=False, ops=False)
    assert res.ok and res.ops == ()
    assert res.figures == {"latency_ns": want.latency_ns, "energy_pj": want.energy_pj,
                           "bound_ns": want.bound_ns}
    assert res.info["tp"] * res.info["pp"] >= 1 and 0 <= res.info["comm_share"] < 1
    assert res.wall["simulate_s"] > 0


def test_a_system_case_with_other_schedules_is_an_error_result() -> None:
    res = Runner().run(ModelCase("llama-tiny", "hbm-pim-x16", context=16, schedules="tuned"))
    assert not res.ok and "default schedules" in res.error


def test_the_full_suite_runs_every_built_in_model_on_every_system() -> None:
    from autosched.frontend import list_models

    cases = {c.id for c in get_suite("full").cases if isinstance(c, ModelCase)}
    for model in list_models():
        for hw in SYSTEM_PRESETS:
            assert any(i.startswith(f"{model}/{hw}/decode-b1-") for i in cases)
