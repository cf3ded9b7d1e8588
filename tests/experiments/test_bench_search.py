"""The search benchmark's pieces: cases, exhaustive cache, replay, curves, summary, goals."""

from __future__ import annotations

import json
import math
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest

from experiments.bench_search import (
    Case,
    Config,
    bench_cases,
    case_data,
    cost_model_eval,
    default_summary,
    goals,
    main,
    ratio_at,
    summarize,
)
from experiments.bench_search_runs import ReplayRunner, search_curve, transfer_model, trials_to
from search_spaces import Workload
from sim.hwio import load_hardware

# two query heads on one KV head (726 points on aim-gddr6), and one head (252 points)
SMALL = Workload.make("attention", b=1, q=1, h=2, kvh=1, d=16, l=16)
OTHER = Workload.make("attention", b=1, q=1, h=1, kvh=1, d=16, l=16)


def test_trials_to_counts_measurements_and_budget_plus_one_when_never() -> None:
    curve = [10.0, 8.0, 8.0, 5.0]
    assert trials_to(curve, 8.0, 4) == 2
    assert trials_to(curve, 5.0, 4) == 4
    assert trials_to(curve, 4.0, 4) == 5
    assert trials_to(curve, 5.0, 3) == 4  # beyond the budget does not count


def test_ratio_at_uses_the_last_value_of_a_short_curve() -> None:
    assert ratio_at([2.0, 1.0], 1) == 2.0
    assert ratio_at([2.0, 1.0], 16) == 1.0


def test_summary_and_goals_from_synthetic_runs() -> None:
    cfg = Config.of(True, budget=32)
    runs = [{"case": c, "strategy": s, "seed": 0, "curve": [2.0] * (n - 1) + [1.0] * (33 - n),
             "trials_to": {"1.05": n, "1.01": n}, "wall_s": 32.0,
             "wall_curve": [float(i + 1) for i in range(32)]}
            for c in ("a", "b") for s, n in (("random", 27), ("tpe", 9), ("autosched", 3))]
    summ = summarize(cfg, runs)
    assert summ["autosched"]["median_trials_to_1.05"] == 3
    assert summ["random"]["best_over_opt_at"]["16"] == 2.0
    assert summ["tpe"]["best_over_opt_at"]["16"] == 1.0
    assert summ["tpe"]["best_over_opt_at"]["64"] is None  # beyond the budget
    assert summ["random"]["reached_1.05"] == 1.0
    assert summ["tpe"]["median_wall_s_to_1.05"] == 9.0  # the wall curve at the 9th measurement
    g = goals(summ, {"pairwise_heldout_workloads": 0.95, "pairwise_heldout_hardware": 0.8})
    assert g["fewer_than_tpe_to_1.05"]["met"] and not g["fewer_than_random_to_1.05"]["met"]
    assert g["pairwise_heldout_workloads"]["met"] and not g["pairwise_heldout_hardware"]["met"]


def test_default_summary_counts_cases_within_target() -> None:
    cases = [{"default_ns": 104.0, "optimum_ns": 100.0}, {"default_ns": 130.0, "optimum_ns": 100.0},
             {"default_ns": 100.0, "optimum_ns": 100.0}]
    d = default_summary(cases)
    assert d["cases_within_1.05"] == 2 and d["cases"] == 3
    assert d["median_default_over_opt"] == pytest.approx(1.04)
    assert d["max_default_over_opt"] == pytest.approx(1.3)


def test_cases_pick_square_down_and_attention() -> None:
    cases = bench_cases(["llama-tiny"], ["hbm-pim"], ["square", "down", "attention"])
    by = {c.role: c.workload for c in cases}
    assert by["square"].dims["n"] == by["square"].dims["k"]
    assert by["down"].dims["k"] > by["down"].dims["n"]
    assert by["attention"].op == "attention"


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory):
    cache = tmp_path_factory.mktemp("cache")
    with ProcessPoolExecutor(2) as pool:
        d = case_data(Case("toy", "attention", "aim-gddr6", SMALL), pool, 2, cache, quiet=True)
        o = case_data(Case("toy", "other", "aim-gddr6", OTHER), pool, 2, cache, quiet=True)
    model = transfer_model(d.case, [d, o], cache / "transfer.ubj")  # trained on OTHER only
    return d, cache, model


def test_exhaustive_data_is_complete_and_cached(small) -> None:
    d, cache, _ = small
    assert len(d.table) == len(d.y) == len(d.x) > 1
    assert d.optimum == min(m.latency_ns for m in d.table.values() if m.ok)
    assert d.optimum <= d.default_ns
    assert (cache / "exhaustive.db").exists()
    with ProcessPoolExecutor(1) as pool:  # a second call reads the cache, measures nothing
        again = case_data(d.case, pool, 1, cache, quiet=True)
    assert again.table.keys() == d.table.keys() and again.optimum == d.optimum


@pytest.mark.parametrize("strategy", ["random", "tpe", "autosched", "evolutionary"])
def test_search_replays_the_table_and_never_beats_the_optimum(small, strategy: str,
                                                              tmp_path: Path) -> None:
    d, _, model = small
    curve, times, _ = search_curve(strategy, d, 8, 0, tmp_path, model)
    assert 1 <= len(curve) == len(times) <= 8 and times[0] > 0
    assert times == sorted(times)
    assert all(b <= a for a, b in zip(curve, curve[1:], strict=False))
    assert curve[-1] >= d.optimum and math.isfinite(curve[-1])


def test_transfer_model_never_sees_the_case_workload(small, tmp_path: Path) -> None:
    d, _, _ = small
    assert transfer_model(d.case, [d], tmp_path / "m.ubj") is None  # only the case itself
    assert not (tmp_path / "m.ubj").exists()
    curve, _, _ = search_curve("autosched", d, 4, 0, tmp_path, None)  # starts from scratch
    assert len(curve) == 4


def test_replay_runner_falls_back_to_simulating(small) -> None:
    d, _, _ = small
    runner = ReplayRunner({})
    from autosched.measure import MeasureInput

    m = next(iter(d.table.values()))
    out = runner.run([MeasureInput(SMALL, m.schedule, load_hardware("aim-gddr6"))])
    assert runner.misses == 1 and out[0].latency_ns == m.latency_ns


def test_cost_model_eval_reports_every_metric_held_out(small) -> None:
    d, cache, _ = small
    other = case_data(Case("toy", "other", "aim-gddr6", OTHER), None, 1, cache, quiet=True)
    cm = cost_model_eval([d, other])
    assert 0.0 <= cm["pairwise_heldout_workloads"] <= 1.0
    held = cm["metrics"]["heldout_workloads"]
    assert held["pairwise"] == pytest.approx(cm["pairwise_heldout_workloads"])
    assert {"spearman", "recall@5", "score@5", "score@1"} <= held.keys()
    assert cm["metrics"]["heldout_hardware"] == {}  # one preset: no other hardware to train on


def test_main_reloads_a_saved_result_prints_the_table_and_saves_the_curves(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    cfg = Config.of(True)
    runs = [{"case": "a", "strategy": s, "seed": 0, "curve": [2.0] * (n - 1) + [1.0] * (33 - n),
             "trials_to": {"1.05": n, "1.01": n}, "wall_s": 32.0,
             "wall_curve": [float(i + 1) for i in range(32)]}
            for s, n in (("random", 30), ("tpe", 9), ("autosched", 2))]
    saved = {"config": cfg.__dict__, "runs": runs, "cases": [
        {"case": "a", "valid_points": 10, "optimum_ns": 1.0, "default_ns": 1.2,
         "sim_s_per_point": 0.1}], "cost_model": {"pairwise_heldout_workloads": 0.95,
                                                  "pairwise_heldout_hardware": 0.9},
        "wall_s": {"exhaustive": 1.0, "total": 2.0}}
    (tmp_path / "r.json").write_text(json.dumps(saved))
    png = tmp_path / "curves.png"
    monkeypatch.setattr("sys.argv", ["bench_search", "--load", str(tmp_path / "r.json"),
                                     "--plot", str(png)])
    main()
    out = capsys.readouterr().out
    assert png.stat().st_size > 1000
    assert "goal fewer_than_tpe_to_1.05: 4.50 (goal 3.0) met" in out
    assert "within 1.05x on 0/1 cases" in out and "a reduced configuration" in out
