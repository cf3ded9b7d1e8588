"""The hand-off tables and figures: from the quick baseline, the tuned program is never
slower than the library kernel on any operator and faster end to end; a library program
whose weights do not fit the device is compared by its kernels alone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autosched.regress import ModelCase, Runner
from autosched.regress.baseline import Baseline, baseline_path
from autosched.regress.handoff import Handoff, assemble, handoff_cases, kernels_ns
from autosched.regress.suites import QUICK_MODELS, QUICK_PRESETS
from autosched.regress.tables import handoff_tables, markdown
from sim.hwio import load_hardware


def _quick_handoffs() -> list[Handoff]:
    base = Baseline.load(baseline_path("quick"))
    out = []
    for m in QUICK_MODELS:
        for hw in QUICK_PRESETS:
            cases = handoff_cases(m, hw, context=128)
            results = {k: base.cases[c.id] for k, c in cases.items()}
            found = {o.workload: "exact" for o in results["tuned"].ops}  # the export
            out.append(assemble(cases, results, found))
    return out


def test_markdown_table_shape() -> None:
    assert markdown(["a", "b"], [[1, "x"]]).splitlines() == ["| a | b |", "|---|---|",
                                                            "| 1 | x |"]


def test_tuned_never_slower_than_the_library_kernel() -> None:
    hs = _quick_handoffs()
    assert len(hs) == len(QUICK_MODELS) * len(QUICK_PRESETS)
    for h in hs:
        assert not h.slower_ops(), (h.case, [o.workload for o in h.slower_ops()])
        assert h.speedup is not None and h.speedup > 1, (h.case, h.speedup)
        assert h.kernel_speedup > 1
        assert any(o.library_ns is not None for o in h.ops)
    table = handoff_tables(hs)
    assert table.count("\n| llama-tiny | hbm-pim |") >= 2 and "does not fit" not in table


@pytest.fixture()
def few_rows(tmp_path: Path) -> str:
    """aim-gddr6 with 100 rows per bank: llama-tiny's default program fits (38 rows at
    context 8), the library kernels' sparser layout does not."""
    d = json.loads(json.dumps(load_hardware("aim-gddr6").to_dict()))
    d["name"] = "aim-100rows"
    d["org"]["rows_per_bank"] = 100
    path = tmp_path / "aim-100rows.json"
    path.write_text(json.dumps(d))
    return str(path)


def test_a_library_program_that_does_not_fit_is_timed_on_a_grown_device(few_rows: str) -> None:
    runner = Runner(repeats=1)
    cases = handoff_cases("llama-tiny", few_rows, context=8)
    assert cases["library"].grow and cases["library"].id.endswith("/library")
    lib = runner.run(cases["library"])
    rows = lib.info["rows_per_bank"]
    assert lib.ok and rows > 100 and int(rows) & (int(rows) - 1) == 0
    # the same program on the full-size preset: a grown device changes no timing
    whole = runner.run(ModelCase("llama-tiny", "aim-gddr6", context=8, schedules="library"))
    assert lib.figures == whole.figures and "rows_per_bank" not in whole.info
    assert lib.ops == runner.kernels_alone(cases["library"])
    default = runner.run(cases["default"])
    assert default.ok and "rows_per_bank" not in default.info
    results = {"library": lib, "default": default, "tuned": default, "fused": default}
    h = assemble(cases, results, {})
    assert h.speedup == lib.figures["latency_ns"] / default.figures["latency_ns"] > 1
    assert h.kernel_speedup == kernels_ns(lib) / kernels_ns(default) > 1
    assert f"({int(rows)} rows per bank)" in handoff_tables([h])


def test_without_grow_a_program_that_does_not_fit_is_compared_by_its_kernels(
        few_rows: str) -> None:
    runner = Runner(repeats=1)
    cases = {**handoff_cases("llama-tiny", few_rows, context=8),
             "library": ModelCase("llama-tiny", few_rows, context=8, schedules="library")}
    lib = runner.run(cases["library"])
    assert not lib.ok and "the device has" in lib.error and not lib.figures
    assert lib.ops == runner.kernels_alone(cases["library"])
    default = runner.run(cases["default"])
    results = {"library": lib, "default": default, "tuned": default, "fused": default}
    h = assemble(cases, results, {})
    assert h.speedup is None
    assert h.kernel_speedup == kernels_ns(lib) / kernels_ns(default) > 1
    assert "does not fit" in handoff_tables([h])
    with pytest.raises(Exception, match="the device has"):
        assemble(cases, {**results, "tuned": lib}, {})
