"""The searches of the search-efficiency benchmark: one strategy, one case, one seed.

Every strategy runs the real :class:`TaskTuner` cold (the default schedule is not
measured first; the default is reported on its own) with a runner that replays the case's
exhaustive measurements. ``autosched`` is TPE with an XGBoost model that was trained on
the exhaustive data of the *other* workloads (never the case's own operator shape, in any
dtype, on any hardware) and is refit on top of those trees as the search measures: the
transfer a new task gets from the database (from scratch when the run holds no other
workload). ``evolutionary`` (not in the default set) is the evolutionary search strategy
ranked by the same model. Runs are spread over worker processes.
"""

from __future__ import annotations

import multiprocessing
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

from autosched.database import open_database
from autosched.measure import MeasureInput, Runner, measure_one
from autosched.measure.record import Measurement
from autosched.search import SearchContext, TaskTuner
from cost_models import XGBRegressionModel, load_cost_model
from experiments.bench_search_data import CACHE, Case, CaseData, _rows, case_data
from sim.hwio import load_hardware

STRATEGIES = ("random", "tpe", "autosched")  # the default set
ALL_STRATEGIES = (*STRATEGIES, "evolutionary")
# benchmark strategy -> (search strategy, whether the cost model ranks its proposals)
SEARCH = {"random": ("random", False), "tpe": ("tpe", False), "autosched": ("tpe", True),
          "evolutionary": ("evolutionary", True)}
THRESHOLDS = (1.05, 1.01)


class ReplayRunner(Runner):
    """Serves measurements from the exhaustive table; simulates only what it lacks.

    ``lowered`` records, per input served, whether it came with its program (the search
    lowered it already, so measuring it costs a simulation only).
    """

    def __init__(self, table: dict[str, Measurement]) -> None:
        self.table, self.misses = table, 0
        self.lowered: list[bool] = []

    def run(self, inputs: Sequence[MeasureInput]) -> list[Measurement]:
        out = []
        for inp in inputs:
            self.lowered.append(inp.program is not None)
            m = self.table.get(inp.schedule.key)
            if m is None:
                self.misses += 1
                m = measure_one(inp)
            out.append(m)
        return out


def transfer_model(case: Case, data: Sequence[CaseData], path: Path, seed: int = 0
                   ) -> Path | None:
    """Train the model ``autosched`` starts ``case`` with (other workloads only) and save it
    at ``path``; None when ``data`` holds no other workload (the search then starts from a
    fresh model, which ranks by the analytical bound until its first fit)."""
    rows = [r for r in _rows(data, seed=seed) if r[0].case.shape != case.shape]
    if not rows:
        return None
    model = XGBRegressionModel(seed=seed, nthread=1)
    model.fit_features(np.concatenate([x for _, x, _ in rows]),
                       np.concatenate([y for _, _, y in rows]),
                       [d.case.label for d, _, y in rows for _ in y])
    model.save(path)
    return path


def search_curve(strategy: str, data: CaseData, budget: int, seed: int, tmp: Path,
                 model_path: Path | None = None
                 ) -> tuple[list[float], list[float], list[bool]]:
    """(best-so-far latency per measurement, the search's own seconds when each
    measurement's round ended, whether each measured point came lowered) of one cold
    search. The search's own time is the CPU time of this process (sampler, moves,
    lowering and featurising, fitting, ranking), which other jobs on a shared machine do
    not inflate; replayed measurements cost nothing here."""
    if strategy not in SEARCH:
        raise ValueError(f"strategy {strategy!r} is not one of {', '.join(ALL_STRATEGIES)}")
    t0 = time.process_time()
    search, ranked = SEARCH[strategy]
    model = None
    if ranked and model_path is None:
        model = XGBRegressionModel(seed=seed, nthread=1)
    elif ranked:
        model = load_cost_model(model_path)
        model.freeze()
    w, hw = data.case.workload, load_hardware(data.case.preset)
    db = open_database(tmp / f"{strategy}-{seed}-{w.digest}-{hw.fingerprint[:8]}.db")
    replay = ReplayRunner(data.table)
    ctx = SearchContext.of(hardware=hw, database=db, runner=replay, trials=budget,
                           strategy=search, seed=seed, cost_model=model)
    tuner = TaskTuner(w, 1, ctx, start_from_default=False)
    times: list[float] = []
    while tuner.measured < budget:
        new = tuner.step(min(8, budget - tuner.measured))
        if not new:
            break
        times += [time.process_time() - t0] * len(new)
    return list(tuner.history[:budget]), times[:budget], replay.lowered[:budget]


def trials_to(curve: Sequence[float], target: float, budget: int) -> int:
    """Measurements needed for the best-so-far to reach ``target`` (budget + 1 if never)."""
    for i, v in enumerate(curve[:budget]):
        if v <= target:
            return i + 1
    return budget + 1


_DATA: dict[str, CaseData] = {}


def _job(job: tuple[Case, str, int, int, str, str | None]) -> dict:
    """Worker: one (case, strategy, seed) search as a benchmark record."""
    case, strategy, seed, budget, cache, model_path = job
    if case.label not in _DATA:
        _DATA[case.label] = case_data(case, None, 1, Path(cache), quiet=True)
    d = _DATA[case.label]
    with tempfile.TemporaryDirectory() as tmp:
        curve, times, lowered = search_curve(strategy, d, budget, seed, Path(tmp),
                                             Path(model_path) if model_path else None)
    measuring = np.cumsum([d.sim_s_per_point + (0.0 if low else d.build_s_per_point)
                           for low in lowered])
    wall = [t + m for t, m in zip(times, measuring, strict=True)]
    return {"case": case.label, "strategy": strategy, "seed": seed,
            "curve": [v / d.optimum for v in curve], "wall_curve": wall,
            "trials_to": {str(t): trials_to(curve, t * d.optimum, budget) for t in THRESHOLDS},
            "wall_s": wall[-1] if wall else 0.0, "search_s": times[-1] if times else 0.0,
            "measure_s": float(measuring[-1]) if len(measuring) else 0.0}


def run_searches(data: list[CaseData], seeds: int, budget: int, workers: int,
                 cache: Path = CACHE, quiet: bool = False,
                 strategies: Sequence[str] = STRATEGIES) -> list[dict]:
    """One record per (case, strategy of ``strategies``, seed): curve (best/opt per
    measurement), wall curve
    (the search's own time plus, per measurement, the case's mean simulation time and,
    when the search did not hand over the lowered program, its mean lowering time),
    trials-to-targets, total wall and its two parts (``search_s``, ``measure_s``)."""
    with tempfile.TemporaryDirectory() as tmp:
        models: dict[str, str | None] = {}
        for d in data:
            key = d.case.shape
            if key not in models:
                p = transfer_model(d.case, data, Path(tmp) / f"transfer-{len(models)}.ubj")
                models[key] = str(p) if p else None
        jobs = [(d.case, s, seed, budget, str(cache),
                 models[d.case.shape] if SEARCH[s][1] else None)
                for d in data for s in strategies for seed in range(seeds)]
        first = sorted(range(len(jobs)), key=lambda i: not SEARCH[jobs[i][1]][1])  # slow first
        # spawn, not fork: XGBoost's OpenMP threads in this process would deadlock a fork
        ctx = multiprocessing.get_context("spawn")
        runs: list[dict] = [{}] * len(jobs)
        with ProcessPoolExecutor(workers, mp_context=ctx) as pool:
            for i, r in zip(first, pool.map(_job, [jobs[i] for i in first]), strict=True):
                runs[i] = r
                if not quiet:
                    print(f"  {r['case']} {r['strategy']} seed {r['seed']}: to 1.05x in "
                          f"{r['trials_to']['1.05']}, {r['wall_s']:.0f} s", file=sys.stderr,
                          flush=True)
    return runs
