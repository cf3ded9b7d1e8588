"""The search benchmark's pieces: cases, exhaustive cache, replay, curves, summary, goals."""

from __future__ import annotations

import math
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest

from experiments.bench_search import (
    Case,
    Config,
    ReplayRunner,
    bench_cases,
    case_data,
    goals,
    ratio_at,
    search_curve,
    summarize,
    trials_to,
)
from search_spaces import Workload
from sim.hwio import load_hardware

SMALL = Workload.make("attention", b=1, q=1, h=2, kvh=1, d=16, l=32)


def test_trials_to_counts_measurements_and_budget_plus_one_when_never() -> None:
    curve = [10.0, 8.0, 8.0, 5.0]
    assert trials_to(curve, 8.0, 4) == 2
    assert trials_to(curve, 5.0, 4) == 4
    assert trials_to(curve, 4.0, 4) == 5
    assert trials_to(curve, 5.0, 3) == 4  # beyond the budget does not count


def test_ratio_at_uses_the_last_value_of_a_short_curve() -> None:
    assert ratio_at([4.0, 2.0], 1, 2.0) == 2.0
    assert ratio_at([4.0, 2.0], 16, 2.0) == 1.0


def test_summary_and_goals_from_synthetic_runs() -> None:
    cfg = Config.of(True, budget=32)
    runs = [{"case": c, "strategy": s, "seed": 0, "curve": [2.0] * (n - 1) + [1.0] * (33 - n),
             "trials_to": {"1.05": n, "1.01": n}, "wall_s": 1.0}
            for c in ("a", "b") for s, n in (("random", 27), ("tpe", 9), ("autosched", 3))]
    summ = summarize(cfg, runs)
    assert summ["autosched"]["median_trials_to_1.05"] == 3
    assert summ["random"]["best_over_opt_at"]["16"] == 2.0
    assert summ["tpe"]["best_over_opt_at"]["16"] == 1.0
    assert summ["tpe"]["best_over_opt_at"]["64"] is None  # beyond the budget
    g = goals(summ, {"pairwise_heldout_workloads": 0.95, "pairwise_heldout_hardware": 0.8})
    assert g["fewer_than_tpe_to_1.05"]["met"] and not g["fewer_than_random_to_1.05"]["met"]
    assert g["pairwise_heldout_workloads"]["met"] and not g["pairwise_heldout_hardware"]["met"]


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
    return d, cache


def test_exhaustive_data_is_complete_and_cached(small) -> None:
    d, cache = small
    assert len(d.table) == len(d.y) == len(d.x) > 1
    assert d.optimum == min(m.latency_ns for m in d.table.values() if m.ok)
    assert d.optimum <= d.default_ns
    assert (cache / "exhaustive.db").exists()
    with ProcessPoolExecutor(1) as pool:  # a second call reads the cache, measures nothing
        again = case_data(d.case, pool, 1, cache, quiet=True)
    assert again.table.keys() == d.table.keys() and again.optimum == d.optimum


@pytest.mark.parametrize("strategy", ["random", "tpe", "autosched"])
def test_search_replays_the_table_and_never_beats_the_optimum(small, strategy: str,
                                                              tmp_path: Path) -> None:
    d, _ = small
    curve, wall = search_curve(strategy, SMALL, load_hardware("aim-gddr6"), d.table, 8, 0,
                               tmp_path)
    assert 1 <= len(curve) <= 8 and wall > 0
    assert all(b <= a for a, b in zip(curve, curve[1:], strict=False))
    assert curve[-1] >= d.optimum and math.isfinite(curve[-1])


def test_replay_runner_falls_back_to_simulating(small) -> None:
    d, _ = small
    runner = ReplayRunner({})
    from autosched.measure import MeasureInput

    m = next(iter(d.table.values()))
    out = runner.run([MeasureInput(SMALL, m.schedule, load_hardware("aim-gddr6"))])
    assert runner.misses == 1 and out[0].latency_ns == m.latency_ns
