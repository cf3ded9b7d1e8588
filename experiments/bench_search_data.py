"""Benchmark cases for the search-efficiency benchmark: the exhaustive data of each case
(every valid point simulated once, cached in ``experiments/.cache/``) and the cost model's
held-out ranking accuracy on it. Used by ``bench_search.py`` and the notebooks."""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from autosched.database import open_database
from autosched.families.registry import build, family_of
from autosched.measure import MeasureInput, measure_one
from autosched.measure.record import Measurement
from cost_models import (
    FEATURE_NAMES,
    FEATURE_VERSION,
    Candidate,
    XGBRegressionModel,
    evaluate,
    featurize,
    pretrained,
)
from search_spaces import Schedule, Workload
from sim import SIM_VERSION
from sim.errors import AutoschedError
from sim.hwio import load_hardware

CACHE = Path(__file__).parent / ".cache"


# ----------------------------------------------------------------- cases and exhaustive data
@dataclass(frozen=True)
class Case:
    """One workload (its role in ``model``'s decode step) on one preset or hardware file."""

    model: str
    role: str
    preset: str
    workload: Workload

    @property
    def label(self) -> str:
        return f"{self.model}/{self.role}@{Path(self.preset).stem}"

    @property
    def shape(self) -> str:
        """The operator and its dimensions, without the dtype: llama2-7b's fp16 and
        llama3-8b's bf16 4096x4096 GEMVs time the same, so held-out folds join them."""
        return f"{self.workload.op}:{self.workload.shape}"


@dataclass
class CaseData:
    """Every valid point of a case measured: table by schedule key, features, latencies."""

    case: Case
    table: dict[str, Measurement]
    x: np.ndarray
    y: np.ndarray
    sim_s_per_point: float  # mean seconds to simulate a lowered point
    default_ns: float
    build_s_per_point: float = 0.0  # mean seconds to lower a point

    @property
    def optimum(self) -> float:
        return float(np.min(self.y))


def bench_cases(models: Sequence[str], presets: Sequence[str], roles: Sequence[str]
                ) -> list[Case]:
    """square: the first GEMV with n == k; down: the GEMV with the largest k; attention."""
    from autosched.frontend import capture
    from autosched.ir import tasks

    out = []
    for model in models:
        ws = [t.workload for t in tasks(capture(model, phase="decode"))]
        gemvs = [w for w in ws if w.op == "gemv"]
        pick = {"square": next(w for w in gemvs if w.dims["n"] == w.dims["k"]),
                "down": max(gemvs, key=lambda w: (w.dims["k"], -w.dims["n"])),
                "attention": next(w for w in ws if w.op == "attention")}
        out += [Case(model, r, p, pick[r]) for p in presets for r in roles]
    return out


TIMED = 8  # points per chunk simulated even when the cache holds them, to time a simulation


def _exhaust(job: tuple[dict, dict, list[dict], list[bool]]
             ) -> list[tuple[Measurement | None, np.ndarray, float, float | None]]:
    """Worker: lower, featurize and simulate points, each lowered once (a failed build
    gives zero features and a failure record); with each point's lowering and simulation
    seconds. A point marked known (its measurement is cached) is simulated only among the
    first ``TIMED`` of the chunk, for the timing; otherwise its record and time are None."""
    wd, hwd, points, known = job
    w, hw = Workload.from_dict(wd), load_hardware(hwd)
    space = family_of(w).space(w, hw)
    out = []
    for i, (p, have) in enumerate(zip(points, known, strict=True)):
        sched = Schedule.of(space, p)
        t0 = time.perf_counter()
        try:
            prog = build(w, p, hw).program
        except AutoschedError:
            prog = None
        t1 = time.perf_counter()
        m = measure_one(MeasureInput(w, sched, hw, prog)) if not have or i < TIMED else None
        t2 = time.perf_counter() if m is not None else None
        f = (featurize([Candidate(w, space, tuple(sorted(p.items())), hw, prog)])[0]
             if prog is not None else np.zeros(len(FEATURE_NAMES)))
        out.append((m, f, t1 - t0, None if t2 is None else t2 - t1))
    return out


def case_data(case: Case, pool: ProcessPoolExecutor | None, workers: int, cache: Path,
              quiet: bool = False) -> CaseData:
    """Measure every valid point of ``case`` once in ``pool`` (the measurements the cache
    database already holds, e.g. from ``bench_exhaustive``, are lowered and featurised
    but not simulated again, except a few per chunk to time a simulation); later calls
    read the cache (``pool`` may then be None)."""
    w, hw = case.workload, load_hardware(case.preset)
    low = family_of(w)
    space = low.space(w, hw)
    cache.mkdir(parents=True, exist_ok=True)
    (cache / ".gitignore").write_text("*\n")
    # every version that changes the cached arrays is in the name (the simulator version
    # has a dot, so the file name is built whole rather than with ``with_suffix``)
    data = cache / (f"{w.digest}-{hw.fingerprint[:16]}-{space.name}v{space.version}"
                    f"-sim{SIM_VERSION}-f{FEATURE_VERSION}t.npz")
    db = open_database(cache / "exhaustive.db")
    try:
        if not data.exists():
            if pool is None:
                raise RuntimeError(f"{case.label} is not in the cache {cache}: pass a pool")
            t0 = time.perf_counter()
            pts = list(space.enumerate())
            have = {m.schedule.key for m in _records(db, w, hw, space)}
            known = [Schedule.of(space, p).key in have for p in pts]
            jobs = [(w.to_dict(), hw.to_dict(), pts[i:i + 64], known[i:i + 64])
                    for i in range(0, len(pts), 64)]
            done = [r for chunk in pool.map(_exhaust, jobs) for r in chunk]
            db.commit_many([r[0] for r, k in zip(done, known, strict=True)
                            if r[0] is not None and not k])
            np.savez(data,
                     keys=np.array([Schedule.of(space, p).key for p in pts]),
                     x=np.stack([r[1] for r in done]),
                     build_s_per_point=np.mean([r[2] for r in done]),
                     s_per_point=np.mean([r[3] for r in done if r[3] is not None]))
            if not quiet:
                print(f"  exhaustive {case.label}: {len(pts)} points in "
                      f"{time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
        z = np.load(data)
        recs = {m.schedule.key: m for m in _records(db, w, hw, space)}
    finally:
        db.close()
    keys = [str(k) for k in z["keys"]]
    table = {k: recs[k] for k in keys}
    default = table.get(Schedule.of(space, low.default(w, hw)).key)
    return CaseData(case, table, z["x"], np.array([table[k].latency_ns for k in keys]),
                    float(z["s_per_point"]), default.latency_ns if default else float("nan"),
                    float(z["build_s_per_point"]))


def _records(db: object, w: Workload, hw: object, space: object) -> list[Measurement]:
    """The cached measurements of ``w`` on ``hw`` under ``space`` and this simulator."""
    return [m for m in db.records(workload=w, hw_fingerprint=hw.fingerprint, space=space.name,
                                  space_version=space.version) if m.sim_version == SIM_VERSION]


# ----------------------------------------------------------------- cost model accuracy
def _rows(data: Sequence[CaseData], n: int = 800, seed: int = 0
          ) -> list[tuple[CaseData, np.ndarray, np.ndarray]]:
    """Per case up to ``n`` measured points (fixed subsample): (data, features, latencies)."""
    rng = np.random.default_rng(seed)
    out = []
    for d in data:
        ok = np.flatnonzero(np.isfinite(d.y))
        sel = np.sort(rng.choice(ok, min(n, len(ok)), replace=False))
        out.append((d, d.x[sel], d.y[sel]))
    return out


def heldout(data: Sequence[CaseData], by: str, seed: int = 0
            ) -> tuple[float, dict[str, tuple[np.ndarray, np.ndarray]]]:
    """Mean pairwise accuracy of a fresh XGBoost model over folds that hold out one
    workload shape (``by="workload"``: every dtype and preset of it) or one preset
    (``by="hardware"``); with per-case (measured, predicted) of the held-out folds."""
    rows = _rows(data, seed=seed)
    fold = (lambda d: d.case.shape) if by == "workload" else (lambda d: d.case.preset)
    scores, preds = [], {}
    for f in dict.fromkeys(fold(d) for d, _, _ in rows):
        tr = [r for r in rows if fold(r[0]) != f]
        te = [r for r in rows if fold(r[0]) == f]
        if not tr:
            continue
        model = XGBRegressionModel(seed=seed)
        model.fit_features(np.concatenate([r[1] for r in tr]), np.concatenate([r[2] for r in tr]),
                           [r[0].case.label for r in tr for _ in r[2]])
        for d, x, y in te:
            p = model.predict_features(x)
            preds[d.case.label] = (y, p)
            scores.append(evaluate([d.case.label] * len(y), y, p)["pairwise"])
    return (float(np.mean(scores)) if scores else float("nan")), preds


def _metrics(preds: dict[str, tuple[np.ndarray, np.ndarray]]) -> dict[str, float]:
    """Every ranking metric of :func:`cost_models.evaluate`, one group per case."""
    labels = [lab for lab, (y, _) in preds.items() for _ in y]
    return evaluate(labels, np.concatenate([y for y, _ in preds.values()]),
                    np.concatenate([p for _, p in preds.values()]))


def cost_model_eval(data: Sequence[CaseData]) -> dict:
    """Ranking accuracy on held-out workloads, held-out hardware and of the pretrained
    model: pairwise accuracy at the top level, all metrics (Spearman, top-k recall,
    top-k score) under ``metrics``."""
    pre = pretrained()
    rows = _rows(data)
    acc_w, pred_w = heldout(data, "workload")
    acc_h, pred_h = heldout(data, "hardware")
    pretrained_metrics = _metrics({d.case.label: (y, pre.predict_features(x))
                                   for d, x, y in rows})
    return {"pairwise_heldout_workloads": acc_w, "pairwise_heldout_hardware": acc_h,
            "pairwise_pretrained": pretrained_metrics["pairwise"],
            "metrics": {"heldout_workloads": _metrics(pred_w) if pred_w else {},
                        "heldout_hardware": _metrics(pred_h) if pred_h else {},
                        "pretrained": pretrained_metrics}}
