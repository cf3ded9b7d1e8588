"""Search efficiency: random vs TPE vs autosched (TPE + XGBoost) against the exhaustive optimum.

Cases: decode workloads of llama-tiny, llama2-7b and llama3-8b (a square GEMV, the down
projection GEMV and attention) on both presets. Every valid point of each case is
simulated once (the exhaustive optimum) and cached in ``experiments/.cache/`` (an autosched
database plus feature matrices), so reruns are fast. The searches then run through the
real :class:`TaskTuner` with a runner that replays the cached measurements; their wall
time is the search's own time (sampler, cost-model fitting) plus, per measurement, the
case's mean simulation time. Also reports the pairwise ranking accuracy of a fresh
XGBoost model on held-out workloads and held-out hardware, from the exhaustive data.

    python -m experiments.bench_search [--quick] [--json] [--plot out.png]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from autosched.measure import MeasureInput, Runner, measure_one
from autosched.search import TaskTuner
from cost_models import pretrained
from experiments.bench_search_data import (  # noqa: F401 (re-exported for the notebooks)
    CACHE,
    Case,
    CaseData,
    _rows,
    bench_cases,
    case_data,
    cost_model_eval,
    heldout,
)
from search_spaces import Workload
from search_spaces.measurement import Measurement
from sim.hardware import Hardware
from sim.hwio import load_hardware

STRATEGIES = ("random", "tpe", "autosched")
CHECKPOINTS = (16, 32, 64, 128)
THRESHOLDS = (1.05, 1.01)


@dataclass(frozen=True)
class Config:
    """What one benchmark run covers."""

    models: tuple[str, ...]
    presets: tuple[str, ...]
    roles: tuple[str, ...]
    seeds: int
    budget: int
    workers: int

    @classmethod
    def of(cls, quick: bool, workers: int = 2, **override: object) -> Config:
        """The quick or the full configuration, with any field overridden (None = keep)."""
        if quick:
            base = cls(("llama-tiny", "llama2-7b"), ("hbm-pim", "aim-gddr6"), ("attention",),
                       1, 16, workers)
        else:
            base = cls(("llama-tiny", "llama2-7b", "llama3-8b"), ("hbm-pim", "aim-gddr6"),
                       ("square", "down", "attention"), 5, 128, workers)
        return replace(base, **{k: v for k, v in override.items() if v is not None})


# ----------------------------------------------------------------- searches
class ReplayRunner(Runner):
    """Serves measurements from the exhaustive table; simulates only what it lacks."""

    def __init__(self, table: dict[str, Measurement]) -> None:
        self.table, self.misses = table, 0

    def run(self, inputs: Sequence[MeasureInput]) -> list[Measurement]:
        out = []
        for inp in inputs:
            m = self.table.get(inp.schedule.key)
            if m is None:
                self.misses += 1
                m = measure_one(inp)
            out.append(m)
        return out


def search_curve(strategy: str, w: Workload, hw: Hardware, table: dict[str, Measurement],
                 budget: int, seed: int, tmp: Path) -> tuple[list[float], float]:
    """(best-so-far latency per measurement, search wall seconds) of one strategy run."""
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy {strategy!r} is not one of {', '.join(STRATEGIES)}")
    t0 = time.perf_counter()
    model = pretrained() if strategy == "autosched" else None
    db = tmp / f"{strategy}-{seed}-{w.digest}-{hw.fingerprint[:8]}.db"
    tuner = TaskTuner(w, 1, hw, db=str(db), runner=ReplayRunner(table),
                      sampler="random" if strategy == "random" else "tpe", seed=seed,
                      cost_model=model)
    while tuner.measured < budget and tuner.step(min(8, budget - tuner.measured)):
        pass
    return list(tuner.history[:budget]), time.perf_counter() - t0


def trials_to(curve: Sequence[float], target: float, budget: int) -> int:
    """Measurements needed for the best-so-far to reach ``target`` (budget + 1 if never)."""
    for i, v in enumerate(curve[:budget]):
        if v <= target:
            return i + 1
    return budget + 1


def ratio_at(curve: Sequence[float], n: int, opt: float) -> float:
    """best-so-far after ``n`` measurements over the optimum (the last value if shorter)."""
    return float(curve[min(n, len(curve)) - 1] / opt)


def run_searches(cfg: Config, data: list[CaseData], quiet: bool = False) -> list[dict]:
    """One record per (case, strategy, seed): curve (best/opt), trials-to-targets, wall."""
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for d in data:
            hw = load_hardware(d.case.preset)
            for strategy in STRATEGIES:
                for seed in range(cfg.seeds):
                    curve, wall = search_curve(strategy, d.case.workload, hw, d.table,
                                               cfg.budget, seed, Path(tmp))
                    runs.append({
                        "case": d.case.label, "strategy": strategy, "seed": seed,
                        "curve": [v / d.optimum for v in curve],
                        "trials_to": {str(t): trials_to(curve, t * d.optimum, cfg.budget)
                                      for t in THRESHOLDS},
                        "wall_s": wall + len(curve) * d.sim_s_per_point})
            if not quiet:
                print(f"  searched {d.case.label}", file=sys.stderr, flush=True)
    return runs


def _trials(curve: Sequence[float], t: float) -> int:
    """trials_to on a best/opt curve, budget = its length."""
    return trials_to(curve, t + 1e-12, len(curve))


def summarize(cfg: Config, runs: list[dict]) -> dict:
    """Per strategy: medians of best/opt at the checkpoints, of trials to 1.05x/1.01x/the
    optimum (over all runs, and over the runs whose first measurement, the default
    schedule, misses the target: ``nan`` when the default always meets it), and wall."""
    out = {}
    for s in STRATEGIES:
        rs = [r for r in runs if r["strategy"] == s]
        med = {}
        for t in (*THRESHOLDS, 1.0):
            med[f"median_trials_to_{t}"] = float(np.median([_trials(r["curve"], t) for r in rs]))
            hard = [_trials(r["curve"], t) for r in rs if r["curve"][0] > t + 1e-12]
            med[f"median_trials_to_{t}_where_default_misses"] = \
                float(np.median(hard)) if hard else float("nan")
        out[s] = {
            "best_over_opt_at": {str(n): float(np.median([ratio_at(r["curve"], n, 1.0)
                                                          for r in rs]))
                                 if n <= cfg.budget else None for n in CHECKPOINTS},
            **med,
            "median_wall_s": float(np.median([r["wall_s"] for r in rs])),
            "total_wall_s": float(sum(r["wall_s"] for r in rs)),
        }
    return out


def goals(summary: dict, cm: dict) -> dict:
    """The benchmark's goals, each with the measured factor and whether it is met; the
    search goals also on the runs where the default schedule misses 1.05x."""
    out = {}
    for suffix in ("", "_where_default_misses"):
        a = summary["autosched"][f"median_trials_to_1.05{suffix}"]
        for other, goal in (("tpe", 3.0), ("random", 10.0)):
            f = summary[other][f"median_trials_to_1.05{suffix}"] / a
            out[f"fewer_than_{other}_to_1.05{suffix}"] = {"factor": f, "goal": goal,
                                                          "met": bool(f >= goal)}
    for k, goal in (("pairwise_heldout_workloads", 0.9), ("pairwise_heldout_hardware", 0.85)):
        out[k] = {"value": cm[k], "goal": goal, "met": bool(cm[k] >= goal)}
    return out


def run(cfg: Config, cache: Path = CACHE, quiet: bool = False) -> dict:
    """The whole benchmark as a JSON-ready dict (see the module doc)."""
    t0 = time.perf_counter()
    cases = bench_cases(cfg.models, cfg.presets, cfg.roles)
    with ProcessPoolExecutor(cfg.workers) as pool:
        data = [case_data(c, pool, cfg.workers, cache, quiet=quiet) for c in cases]
    t_exh = time.perf_counter() - t0
    runs = run_searches(cfg, data, quiet)
    summary = summarize(cfg, runs)
    cm = cost_model_eval(data)
    return {"config": cfg.__dict__, "summary": summary, "cost_model": cm,
            "goals": goals(summary, cm),
            "cases": [{"case": d.case.label, "valid_points": len(d.table),
                       "optimum_ns": d.optimum, "default_ns": d.default_ns,
                       "sim_s_per_point": d.sim_s_per_point} for d in data],
            "runs": runs, "wall_s": {"exhaustive": t_exh, "total": time.perf_counter() - t0}}


def table(res: dict) -> str:
    """The result as a plain-text table."""
    cps = [c for c, v in next(iter(res["summary"].values()))["best_over_opt_at"].items()
           if v is not None]
    head = (f"{'strategy':<10}" + "".join(f"{'@' + c:>8}" for c in cps)
            + f"{'to1.05':>8}{'to1.01':>8}{'to opt':>8}{'miss1.05':>9}{'miss1.01':>9}"
            + f"{'wall s':>9}")
    lines = [head]
    for s, v in res["summary"].items():
        lines.append(f"{s:<10}" + "".join(f"{v['best_over_opt_at'][c]:>8.3f}" for c in cps)
                     + "".join(f"{v[f'median_trials_to_{t}']:>8.1f}" for t in (1.05, 1.01, 1.0))
                     + "".join(f"{v[f'median_trials_to_{t}_where_default_misses']:>9.1f}"
                               for t in (1.05, 1.01))
                     + f"{v['median_wall_s']:>9.2f}")
    cm = res["cost_model"]
    lines.append(f"pairwise accuracy: held-out workloads {cm['pairwise_heldout_workloads']:.3f}, "
                 f"held-out hardware {cm['pairwise_heldout_hardware']:.3f}")
    for name, g in res["goals"].items():
        fig = g.get("factor", g.get("value"))
        lines.append(f"goal {name}: {fig:.2f} (goal {g['goal']}) {'met' if g['met'] else 'MISSED'}")
    lines.append(f"wall: exhaustive {res['wall_s']['exhaustive']:.0f} s, "
                 f"total {res['wall_s']['total']:.0f} s")
    return "\n".join(lines)


def plot(res: dict, path: str | Path) -> None:
    """Median best/opt vs measurements per strategy, to a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for s in STRATEGIES:
        curves = [r["curve"] for r in res["runs"] if r["strategy"] == s]
        n = min(len(c) for c in curves)
        ax.plot(np.arange(1, n + 1), np.median([c[:n] for c in curves], axis=0), label=s)
    ax.set(xscale="log", yscale="log", xlabel="measurements", ylabel="best / optimum (median)")
    ax.axhline(1.05, ls=":", c="grey")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true",
                    help="attention of llama-tiny and llama2-7b, 1 seed, budget 16")
    ap.add_argument("--json", action="store_true", help="print JSON instead of the table")
    ap.add_argument("--plot", default=None, help="write the curves to this PNG")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seeds", type=int, default=None, help="override the seed count")
    ap.add_argument("--budget", type=int, default=None, help="override the budget")
    ap.add_argument("--models", default=None, help="override the models (comma-separated)")
    ap.add_argument("--roles", default=None, help="square,down,attention subset")
    ap.add_argument("--save", default=None, help="also write the full result JSON here")
    ap.add_argument("--load", default=None, help="re-summarize a result saved with --save")
    a = ap.parse_args()
    split = lambda v: tuple(v.split(",")) if v else None  # noqa: E731
    cfg = Config.of(a.quick, a.workers, seeds=a.seeds, budget=a.budget, models=split(a.models),
                    roles=split(a.roles))
    if a.load:
        res = json.loads(Path(a.load).read_text())
        cfg = Config(**{k: tuple(v) if isinstance(v, list) else v
                        for k, v in res["config"].items()})
        res["summary"] = summarize(cfg, res["runs"])
        res["goals"] = goals(res["summary"], res["cost_model"])
    else:
        res = run(cfg, quiet=a.json)
    if a.save:
        Path(a.save).write_text(json.dumps(res))
    if a.plot:
        plot(res, a.plot)
    if a.json:
        print(json.dumps({k: v for k, v in res.items() if k != "runs"}, indent=1))
    else:
        print(table(res))


if __name__ == "__main__":
    main()
