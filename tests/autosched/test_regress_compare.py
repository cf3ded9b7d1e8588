"""The regression gate's verdicts: exact on simulated figures, reasons for allowed moves,
a wall-clock band that never fails."""

from __future__ import annotations

import math

import pytest

from autosched.regress.baseline import Baseline, BaselineError, Expected
from autosched.regress.compare import compare
from autosched.regress.results import CaseResult, OpFigures

GEMV = "gemv:m=1,n=256,k=256:fp16"
NORM = "rmsnorm:m=1,n=256:fp16:eps=1e-05"


def result(lat: float = 1000.0, gemv: float = 600.0, energy: float = 5.0, bound: float = 400.0,
           compile_s: float = 0.3, case: str = "m/hw/decode-b1-c8/default",
           ops: tuple[str, ...] = (GEMV, NORM)) -> CaseResult:
    rows = {GEMV: OpFigures(GEMV, ("q_proj", "o_proj"), 8, gemv, 2.0, 300.0, "s1"),
            NORM: OpFigures(NORM, ("attn_norm",), 9, 200.0, 1.0, 100.0, "s2")}
    return CaseResult(case, "model", {"latency_ns": lat, "energy_pj": energy,
                                      "bound_ns": bound},
                      tuple(rows[o] for o in ops), {"compile_s": compile_s, "simulate_s": 0.1})


def base_of(*results: CaseResult, expected: tuple[Expected, ...] = ()) -> Baseline:
    return Baseline("quick", 1, {r.case: r for r in results}, expected)


def test_identical_figures_pass() -> None:
    rep = compare(base_of(result()), [result()])
    assert not rep.failed and rep.verdicts[0].verdict == "ok"


def test_the_smallest_slowdown_fails_and_names_the_operator() -> None:
    slower = math.nextafter(600.0, math.inf)
    rep = compare(base_of(result()), [result(lat=math.nextafter(1000.0, math.inf),
                                             gemv=slower)])
    v = rep.verdicts[0]
    assert rep.failed and v.verdict == "regressed"
    assert [c.op for c in v.moved_ops] == [GEMV]
    assert "  q_proj/o_proj gemv:m=1,n=256,k=256:fp16: latency +" in rep.summary()
    assert NORM not in rep.summary()


def test_an_improvement_fails_until_the_baseline_is_updated() -> None:
    rep = compare(base_of(result()), [result(lat=900.0, gemv=500.0, energy=4.0)])
    assert rep.failed and rep.verdicts[0].verdict == "improved"


def test_a_moved_bound_or_a_vanished_operator_is_a_change() -> None:
    assert compare(base_of(result()), [result(bound=401.0)]).verdicts[0].verdict == "changed"
    v = compare(base_of(result()), [result(ops=(GEMV,))]).verdicts[0]
    assert v.verdict == "changed" and "vanished" in v.changes[0].describe()


def test_expected_change_passes_within_its_tolerance_only() -> None:
    allow = Expected("m/*", "latency_ns", 0.05, "operator reordering lands next release",
                     op="*")
    ok = compare(base_of(result(), expected=(allow,)), [result(lat=1040.0, gemv=620.0)])
    assert not ok.failed and ok.verdicts[0].verdict == "expected"
    assert ok.verdicts[0].changes[0].reason.startswith("operator reordering")
    too_far = compare(base_of(result(), expected=(allow,)), [result(lat=1100.0)])
    assert too_far.failed


def test_an_expected_change_needs_a_reason() -> None:
    with pytest.raises(BaselineError, match="no reason"):
        Expected("*", "latency_ns", 0.1, "  ")
    with pytest.raises(BaselineError, match="tolerance"):
        Expected("*", "latency_ns", -1, "why")


def test_wall_clock_band_flags_but_never_fails() -> None:
    v = compare(base_of(result()), [result(compile_s=3.0)], band=1.5).verdicts[0]
    assert v.verdict == "ok"
    assert ("compile_s", 0.3, 3.0, "slower") in v.wall


def test_new_gone_and_error_cases_fail() -> None:
    other = result(case="m/hw/prefill-b1-c8/default")
    rep = compare(base_of(result(), other), [result(case="m/hw/decode-b2-c8/default"),
                                             CaseResult(result().case, "model", error="boom")],
                  suite_ids={result().case, "m/hw/decode-b2-c8/default"})
    assert {v.case: v.verdict for v in rep.verdicts} == {
        "m/hw/decode-b2-c8/default": "new", result().case: "error", other.case: "gone"}
    assert "boom" in rep.summary()
