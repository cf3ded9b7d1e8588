"""The suite's files: baseline and tuned export round trips, history under concurrent and
killed writers, the history plot, and the checked-in suite data itself."""

from __future__ import annotations

import json
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest

from autosched.regress import TunedExport, TunedExportError, get_suite
from autosched.regress.baseline import Baseline, BaselineError, Expected, baseline_path
from autosched.regress.cases import ModelCase
from autosched.regress.history import append_history, load_history, plot_history
from autosched.regress.results import CaseResult, OpFigures
from autosched.regress.tuned import TUNED_PATH
from search_spaces import Schedule

OP = OpFigures("gemv:m=1,n=8,k=8:fp16", ("q_proj",), 2, 10.5, 3.25, 7.0, "gemv@v1:x")
RES = CaseResult("m/hw/decode-b1-c8/default", "model",
                 {"latency_ns": 36808.154, "energy_pj": 353706049.28, "bound_ns": 1 / 3},
                 (OP,), {"compile_s": 0.3}, {"tokens_per_s": 2.0})


def test_baseline_round_trips_every_float_exactly(tmp_path: Path) -> None:
    b = Baseline("quick", 1, {RES.case: RES},
                 (Expected("m/*", "energy_pj", 0.01, "energy model recalibration"),))
    b = b.updated([RES], suite_version=1, reason="first", commit={"commit": "abc",
                                                                  "dirty": False}, changed=[])
    b.save(tmp_path / "b.json")
    back = Baseline.load(tmp_path / "b.json")
    assert back.cases[RES.case] == RES and back.expected == b.expected
    assert back.updates[-1]["reason"] == "first"


@pytest.mark.parametrize("text, match", [
    (None, "no baseline"), ("{", "unreadable"), ('{"format": 1}', "malformed"),
    ('{"format": 9}', "format 9"),
    ('{"format": 1, "suite": "quick", "suite_version": 1, "cases": {}, "expected": '
     '[{"case": "*", "metric": "*", "tolerance": 0.1, "reason": ""}]}', "no reason"),
])
def test_bad_baselines_say_what_is_wrong(tmp_path: Path, text: str | None, match: str) -> None:
    p = tmp_path / "b.json"
    if text is not None:
        p.write_text(text)
    with pytest.raises(BaselineError, match=match):
        Baseline.load(p)


def test_an_update_needs_a_reason() -> None:
    with pytest.raises(BaselineError, match="--reason"):
        Baseline("quick", 1).updated([RES], suite_version=1, reason=" ", commit={}, changed=[])


def _append_many(args: tuple[str, int]) -> None:
    path, who = args
    for i in range(25):
        append_history(path, {"cases": {"c": {"latency_ns": float(i)}}, "who": who,
                              "pad": "x" * 5000})


def test_history_survives_concurrent_and_killed_writers(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    with ProcessPoolExecutor(4) as ex:
        list(ex.map(_append_many, [(str(path), w) for w in range(4)]))
    with open(path, "a") as f:
        f.write('{"cases": {"c": {"lat')  # a writer killed mid-line
    entries = load_history(path)
    assert len(entries) == 100
    assert sorted(e["who"] for e in entries) == sorted(list(range(4)) * 25)


def test_plot_draws_every_case(tmp_path: Path) -> None:
    entries = [{"commit": f"{i:040x}", "dirty": i == 2, "cases": {
        "a/hbm-pim/decode-b1-c8/default": {"latency_ns": 1000.0 + i, "compile_s": 0.3,
                                           "simulate_s": 0.1},
        "tune/x/hbm-pim/ffn_down-t16-none": {"tune_s": 2.0 + i}}} for i in range(3)]
    out = plot_history(entries, tmp_path / "p.png", title="t")
    assert out.stat().st_size > 10_000 and out.read_bytes()[:4] == b"\x89PNG"


def test_tuned_export_names_what_it_lacks(tmp_path: Path) -> None:
    from autosched.pipeline import model_graph
    from sim.hwio import load_hardware

    hw = load_hardware("hbm-pim")
    graph = model_graph("llama-tiny", context=16)[1]
    export = TunedExport({hw.name: (hw.fingerprint, {})})
    with pytest.raises(TunedExportError, match="no schedule on hbm-pim for 13 workload"):
        export.choices(graph, hw)
    (tmp_path / "t.json").write_text('{"format": 1, "hardware": {"x": {}}}')
    with pytest.raises(TunedExportError, match="malformed"):
        TunedExport.load(tmp_path / "t.json")


@pytest.mark.parametrize("name", ["quick", "full"])
def test_each_suite_has_a_baseline_of_exactly_its_cases(name: str) -> None:
    suite = get_suite(name)
    base = json.loads(baseline_path(name).read_text())
    assert set(base["cases"]) == {c.id for c in suite.cases}
    assert base["suite_version"] == suite.version
    assert all(u["reason"].strip() for u in base["updates"])


@pytest.mark.parametrize("name", ["quick"])
def test_checked_in_data_covers_the_suite(name: str) -> None:
    """Every tuned case of the suite finds every schedule, valid in today's spaces, and
    the suite has a baseline for exactly its cases (the full suite's tuned cases are
    checked by its baseline run: a missing schedule is an error there)."""
    from autosched.families import family_of
    from autosched.pipeline import model_graph
    from autosched.regress import resolve_model
    from search_spaces.fusion import FULL_FUSION
    from sim.hwio import load_hardware

    export = TunedExport.load(TUNED_PATH)
    suite = get_suite(name)
    base = json.loads(baseline_path(name).read_text())
    assert set(base["cases"]) == {c.id for c in suite.cases}
    assert base["suite_version"] == suite.version
    for c in suite.cases:
        if not (isinstance(c, ModelCase) and c.schedules == "tuned"):
            continue
        hw = load_hardware(c.hw)
        graph = model_graph(resolve_model(c.model), phase=c.phase, batch=c.batch,
                            context=c.context,
                            fusion=dict(FULL_FUSION) if c.fusion == "full" else {})[1]
        for node, choice in export.choices(graph, hw).items():
            w = graph.node(node).workload
            assert isinstance(choice.schedule, Schedule) and choice.workload == w
            family_of(w).space(w, hw).check(choice.schedule.point)
