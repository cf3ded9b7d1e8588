"""Search efficiency: random vs TPE vs autosched (TPE + XGBoost) against the exhaustive optimum.

Cases: decode workloads of llama-tiny, llama2-7b and llama3-8b (a square GEMV, the down
projection GEMV and attention) on both presets. Every valid point of each case is
simulated once (the exhaustive optimum) and cached in ``experiments/.cache/`` (an autosched
database plus feature matrices), so reruns are fast. The searches then run cold through
the real :class:`TaskTuner` (:mod:`experiments.bench_search_runs`) with a runner that
replays the cached measurements; their wall time is the search's own time (sampler,
lowering of ranked candidates, cost-model fitting) plus, per measurement, the case's mean
simulation time. The hand-written default schedule is reported against the optimum on
its own line. Also reports the pairwise ranking accuracy of a fresh XGBoost model on
held-out workloads and held-out hardware, from the exhaustive data.

    python -m experiments.bench_search [--quick] [--json] [--plot out.png | --no-plot]
        [--presets hbm-pim,aim-gddr6 | --presets experiments/hw/hbm3-pim.yaml]
        [--strategies random,tpe,autosched,evolutionary]

``--strategies`` adds ``evolutionary`` (the evolutionary search strategy ranked by the
same transferred model as ``autosched``) or runs a subset; the goals are judged only
when random, tpe and autosched all ran.

The curves are saved to ``experiments/.cache/bench_search.png`` unless ``--plot`` names
another file or ``--no-plot`` is given.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

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
from experiments.bench_search_runs import (
    ALL_STRATEGIES,
    STRATEGIES,
    THRESHOLDS,
    run_searches,
    trials_to,
)
from sim.writes import write_atomic

CHECKPOINTS = (16, 32, 64, 128)


@dataclass(frozen=True)
class Config:
    """What one benchmark run covers."""

    models: tuple[str, ...]
    presets: tuple[str, ...]
    roles: tuple[str, ...]
    seeds: int
    budget: int
    workers: int
    strategies: tuple[str, ...] = STRATEGIES

    @classmethod
    def of(cls, quick: bool, workers: int = 2, **override: object) -> Config:
        """The quick or the full configuration, with any field overridden (None = keep)."""
        if quick:
            base = cls(("llama-tiny", "llama2-7b"), ("hbm-pim", "aim-gddr6"), ("attention",),
                       1, 32, workers)
        else:
            base = cls(("llama-tiny", "llama2-7b", "llama3-8b"), ("hbm-pim", "aim-gddr6"),
                       ("square", "down", "attention"), 5, 128, workers)
        return replace(base, **{k: v for k, v in override.items() if v is not None})


def _trials(curve: Sequence[float], t: float) -> int:
    """trials_to on a best/opt curve, budget = its length."""
    return trials_to(curve, t + 1e-12, len(curve))


def ratio_at(curve: Sequence[float], n: int) -> float:
    """best/opt after ``n`` measurements (the last value if the curve is shorter)."""
    return float(curve[min(n, len(curve)) - 1])


def _wall_to(run: dict, t: float) -> float:
    """Wall seconds until the run's best reached ``t`` x the optimum (its whole wall if never:
    a lower bound)."""
    n = _trials(run["curve"], t)
    return run["wall_curve"][n - 1] if n <= len(run["wall_curve"]) else run["wall_s"]


def summarize(cfg: Config, runs: list[dict]) -> dict:
    """Per strategy: medians over all (case, seed) runs of best/opt at the checkpoints, of
    measurements to 1.05x, 1.01x and the optimum (budget + 1 when not reached), of the
    wall seconds to 1.05x (the whole search's when not reached) and per search; the share
    of runs that reach 1.05x, the mean measurements to it, and the mean wall per search
    with its parts (the search's own seconds, the measuring seconds)."""
    out = {}
    for s in _ran(runs):
        rs = [r for r in runs if r["strategy"] == s]
        out[s] = {
            "best_over_opt_at": {str(n): float(np.median([ratio_at(r["curve"], n) for r in rs]))
                                 if n <= cfg.budget else None for n in CHECKPOINTS},
            **{f"median_trials_to_{t}": float(np.median([_trials(r["curve"], t) for r in rs]))
               for t in (*THRESHOLDS, 1.0)},
            "reached_1.05": float(np.mean([_trials(r["curve"], 1.05) <= cfg.budget for r in rs])),
            "mean_trials_to_1.05": float(np.mean([_trials(r["curve"], 1.05) for r in rs])),
            "median_wall_s_to_1.05": float(np.median([_wall_to(r, 1.05) for r in rs])),
            "median_wall_s": float(np.median([r["wall_s"] for r in rs])),
            "mean_wall_s": float(np.mean([r["wall_s"] for r in rs])),
            "mean_search_s": float(np.mean([r.get("search_s", np.nan) for r in rs])),
            "mean_measure_s": float(np.mean([r.get("measure_s", np.nan) for r in rs])),
            "total_wall_s": float(sum(r["wall_s"] for r in rs)),
        }
    return out


def _ran(runs: list[dict]) -> list[str]:
    """The strategies with runs, in the benchmark's order."""
    have = {r["strategy"] for r in runs}
    return [s for s in ALL_STRATEGIES if s in have]


def default_summary(cases: list[dict]) -> dict:
    """The hand-written default schedule against the optimum (what a search must beat)."""
    r = np.array([c["default_ns"] / c["optimum_ns"] for c in cases])
    return {"median_default_over_opt": float(np.median(r)), "max_default_over_opt": float(r.max()),
            "cases_within_1.05": int((r <= 1.05 + 1e-12).sum()), "cases": len(r)}


def goals(summary: dict, cm: dict) -> dict:
    """The benchmark's goals, each with the measured factor and whether it is met (the
    search goals only when random, tpe and autosched all ran)."""
    out = {}
    if set(STRATEGIES) <= summary.keys():
        a = summary["autosched"]["mean_trials_to_1.05"]
        for other, goal in (("tpe", 3.0), ("random", 10.0)):
            f = summary[other]["mean_trials_to_1.05"] / a
            out[f"fewer_than_{other}_to_1.05"] = {"factor": f, "goal": goal,
                                                  "met": bool(f >= goal)}
        f = summary["tpe"]["mean_wall_s"] / summary["autosched"]["mean_wall_s"]
        out["wall_per_search_vs_tpe"] = {"factor": f, "goal": 1.0, "met": bool(f >= 1.0)}
    for k, goal in (("pairwise_heldout_workloads", 0.9), ("pairwise_heldout_hardware", 0.85)):
        if math.isfinite(cm[k]):  # nan: one hardware only, so nothing to hold out
            out[k] = {"value": cm[k], "goal": goal, "met": bool(cm[k] >= goal)}
    return out


def run(cfg: Config, cache: Path = CACHE, quiet: bool = False) -> dict:
    """The whole benchmark as a JSON-ready dict (see the module doc)."""
    t0 = time.perf_counter()
    cases = bench_cases(cfg.models, cfg.presets, cfg.roles)
    with ProcessPoolExecutor(cfg.workers) as pool:
        data = [case_data(c, pool, cfg.workers, cache, quiet=quiet) for c in cases]
    t_exh = time.perf_counter() - t0
    runs = run_searches(data, cfg.seeds, cfg.budget, cfg.workers, cache, quiet,
                        cfg.strategies)
    summary = summarize(cfg, runs)
    cm = cost_model_eval(data)
    cases = [{"case": d.case.label, "valid_points": len(d.table), "optimum_ns": d.optimum,
              "default_ns": d.default_ns, "sim_s_per_point": d.sim_s_per_point} for d in data]
    return {"config": cfg.__dict__, "summary": summary, "default": default_summary(cases),
            "cost_model": cm, "goals": goals(summary, cm), "cases": cases,
            "runs": runs, "wall_s": {"exhaustive": t_exh, "total": time.perf_counter() - t0}}


def table(res: dict) -> str:
    """The result as a plain-text table."""
    cps = [c for c, v in next(iter(res["summary"].values()))["best_over_opt_at"].items()
           if v is not None]
    head = (f"{'strategy':<10}" + "".join(f"{'@' + c:>8}" for c in cps)
            + f"{'to1.05':>8}{'mean':>7}{'to1.01':>8}{'to opt':>8}{'hit1.05':>8}"
            + f"{'s to1.05':>9}{'wall s':>8}{'search':>8}{'measure':>8}")
    lines = [head]
    for s, v in res["summary"].items():
        lines.append(f"{s:<10}" + "".join(f"{v['best_over_opt_at'][c]:>8.3f}" for c in cps)
                     + f"{v['median_trials_to_1.05']:>8.1f}{v['mean_trials_to_1.05']:>7.1f}"
                     + "".join(f"{v[f'median_trials_to_{t}']:>8.1f}" for t in (1.01, 1.0))
                     + f"{v['reached_1.05']:>8.0%}{v['median_wall_s_to_1.05']:>9.2f}"
                     + f"{v.get('mean_wall_s', v['median_wall_s']):>8.2f}"
                     + f"{v.get('mean_search_s', float('nan')):>8.2f}"
                     + f"{v.get('mean_measure_s', float('nan')):>8.2f}")
    lines.append("(to1.05, to1.01, to opt: median measurements, budget + 1 when never; mean: "
                 "the mean to 1.05x; wall s = search + measure, means per search; search s "
                 "is the search's own CPU time)")
    d = res["default"]
    lines.append(f"default schedule: median {d['median_default_over_opt']:.3f}x the optimum, "
                 f"worst {d['max_default_over_opt']:.3f}x, within 1.05x on "
                 f"{d['cases_within_1.05']}/{d['cases']} cases")
    cm = res["cost_model"]
    for name, m in cm.get("metrics", {}).items():
        lines.append(f"cost model, {name.replace('_', ' ')}: "
                     + ", ".join(f"{k} {v:.3f}" for k, v in m.items() if k != "groups"))
    for name, g in res["goals"].items():
        fig = g.get("factor", g.get("value"))
        lines.append(f"goal {name}: {fig:.2f} (goal {g['goal']}) {'met' if g['met'] else 'MISSED'}")
    c = res["config"]
    if c["seeds"] < 5 or c["budget"] < 128 or len(c["models"]) < 3 or len(c["roles"]) < 3:
        lines.append("(a reduced configuration: the goals are judged on the full one, "
                     "5 seeds x 128 measurements x 18 cases)")
    lines.append(f"wall: exhaustive {res['wall_s']['exhaustive']:.0f} s, "
                 f"total {res['wall_s']['total']:.0f} s")
    return "\n".join(lines)


def plot(res: dict, path: str | Path) -> None:
    """Median best/opt vs measurements per strategy, to a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for s in _ran(res["runs"]):
        curves = [r["curve"] for r in res["runs"] if r["strategy"] == s]
        n = min(len(c) for c in curves)
        ax.plot(np.arange(1, n + 1), np.median([c[:n] for c in curves], axis=0), label=s)
    ax.set(xscale="log", yscale="log", xlabel="measurements", ylabel="best / optimum (median)")
    ax.axhline(1.05, ls=":", c="grey")
    ax.legend()
    fig.tight_layout()
    write_atomic(Path(path), lambda tmp: fig.savefig(tmp, dpi=110,
                                                   format=Path(path).suffix[1:] or "png"))
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true",
                    help="attention of llama-tiny and llama2-7b, 1 seed, budget 32 (< 1 min)")
    ap.add_argument("--json", action="store_true", help="print JSON instead of the table")
    ap.add_argument("--plot", default=str(CACHE / "bench_search.png"),
                    help="write the curves to this PNG (default: %(default)s)")
    ap.add_argument("--no-plot", action="store_true", help="do not draw the curves")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seeds", type=int, default=None, help="override the seed count")
    ap.add_argument("--budget", type=int, default=None, help="override the budget")
    ap.add_argument("--models", default=None, help="override the models (comma-separated)")
    ap.add_argument("--roles", default=None, help="square,down,attention subset")
    ap.add_argument("--presets", default=None,
                    help="override the hardware (comma-separated preset names or YAML files)")
    ap.add_argument("--strategies", default=None,
                    help=f"override the strategies (comma-separated, of "
                         f"{','.join(ALL_STRATEGIES)})")
    ap.add_argument("--cache", default=str(CACHE), help="exhaustive-data cache directory")
    ap.add_argument("--save", default=None, help="also write the full result JSON here")
    ap.add_argument("--load", default=None, help="re-summarize a result saved with --save")
    a = ap.parse_args()
    split = lambda v: tuple(v.split(",")) if v else None  # noqa: E731
    strategies = split(a.strategies)
    if strategies and not set(strategies) <= set(ALL_STRATEGIES):
        ap.error(f"--strategies takes {', '.join(ALL_STRATEGIES)}")
    cfg = Config.of(a.quick, a.workers, seeds=a.seeds, budget=a.budget, models=split(a.models),
                    roles=split(a.roles), presets=split(a.presets), strategies=strategies)
    if a.load:
        res = json.loads(Path(a.load).read_text())
        cfg = Config(**{k: tuple(v) if isinstance(v, list) else v
                        for k, v in res["config"].items()})
        res["summary"] = summarize(cfg, res["runs"])
        res["default"] = default_summary(res["cases"])
        res["goals"] = goals(res["summary"], res["cost_model"])
    else:
        res = run(cfg, Path(a.cache), quiet=a.json)
    if a.save:
        write_atomic(Path(a.save), json.dumps(res))
    if not a.no_plot:
        Path(a.plot).parent.mkdir(parents=True, exist_ok=True)
        plot(res, a.plot)
        if not a.json:
            print(f"curves: {a.plot}")
    if a.json:
        print(json.dumps({k: v for k, v in res.items() if k != "runs"}, indent=1))
    else:
        print(table(res))


if __name__ == "__main__":
    main()
