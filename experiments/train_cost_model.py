"""Build the pretrained cost model shipped in ``cost_models/pretrained/<name>.ubj``.

Pipeline: capture the decode step of llama-tiny, llama2-7b and llama3-8b (plus a few odd
GEMV shapes) into workloads; for every workload and hardware (both presets and two
variants of them with other channel counts, timings and clocks) sample points of the
family's real space (``autosched.codegen``), lower and simulate them in 2 worker
processes; featurize in the workers. Then report ranking metrics on held-out workloads and
on held-out hardware, train on everything and save the model with a metadata sidecar.
Re-run: ::

    python -m experiments.train_cost_model [--per-task 40] [--name default] [--quick]
"""

from __future__ import annotations

import argparse
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np

from cost_models import CostModelError, XGBRankModel, XGBRegressionModel, evaluate
from cost_models.features import FEATURE_NAMES
from cost_models.registry import PRETRAINED_DIR
from search_spaces import Workload
from sim.errors import AutoschedError
from sim.hwio import load_hardware

MODELS = ("llama-tiny", "llama2-7b", "llama3-8b")
ODD = [Workload.make("gemv", m=1, n=n, k=k) for n, k in ((11008, 4096), (14336, 4096),
                                                          (1000, 3000), (96, 5120))]
ODD.append(Workload.make("gemv", m=4, n=2048, k=1536))


def hardware_set() -> dict[str, dict]:
    """The two presets and one variant of each (name -> hardware mapping)."""
    out = {}
    for preset in ("hbm-pim", "aim-gddr6"):
        out[preset] = load_hardware(preset).to_dict()
    v = load_hardware("hbm-pim").to_dict()
    v["name"] = "hbm-pim-v2"
    v["org"]["channels"] = 32
    v["timing"].update(tccd_l=6, trcd_mac=20)
    v["pim"]["clock_mhz"] = 400
    v["bus"]["data_rate_gbps"] = 2.4
    out["hbm-pim-v2"] = v
    a = load_hardware("aim-gddr6").to_dict()
    a["name"] = "aim-gddr6-v2"
    a["org"]["channels"] = 16
    a["timing"].update(trcd_mac=72, tfaw=56)
    a["pim"]["registers"] = 8
    out["aim-gddr6-v2"] = a
    return out


def workloads(quick: bool) -> list[Workload]:
    """Unique workloads of the models' decode steps plus the odd shapes."""
    from autosched.frontend import capture
    from autosched.ir import tasks

    seen: dict[str, Workload] = {w.key: w for w in ODD}
    for model in MODELS[:1] if quick else MODELS:
        for batch in (1, 4):
            for t in tasks(capture(model, phase="decode", batch=batch, context=256)):
                seen.setdefault(t.workload.key, t.workload)
    return list(seen.values())


def _sample(w: Workload, hw, n: int, rng: np.random.Generator):
    """(space, [(point, program)]) of ``n`` points sampled from the family's space."""
    from autosched.families import family_of

    low = family_of(w)
    space = low.space(w, hw)
    points = space.sample(rng, n)
    return space, [(p, low.lower(w, p, hw).program) for p in points]


def job(args: tuple[dict, str, dict, int, int]) -> tuple[str, str, str, np.ndarray, np.ndarray]:
    """Worker: sample, lower, simulate and featurize one task; failures become inf."""
    from cost_models import Candidate, featurize
    from sim.timing import simulate

    wd, hw_name, hwd, n, seed = args
    w, hw = Workload.from_dict(wd), load_hardware(hwd)
    rng = np.random.default_rng(seed)
    try:
        space, progs = _sample(w, hw, n, rng)
    except AutoschedError as e:
        return w.key, hw_name, f"skipped: {e}"[:160], np.zeros((0, 0)), np.zeros(0)
    uniq = {tuple(sorted(p.items())): prog for p, prog in progs}
    cands = [Candidate(w, space, pt, hw, prog) for pt, prog in uniq.items()]
    lat = []
    for c in cands:
        try:
            lat.append(simulate(c.program, hw).latency_ns)
        except AutoschedError:
            lat.append(np.inf)
    return w.key, hw_name, w.op, featurize(cands), np.asarray(lat)


def fit_eval(kind: str, rows: list, train, test, seed: int) -> dict[str, float]:
    """Train on rows passing ``train``, evaluate on rows passing ``test``."""
    sel = lambda f: [r for r in rows if f(r)]  # noqa: E731
    tr, te = sel(train), sel(test)
    model = (XGBRegressionModel if kind == "xgb" else XGBRankModel)(seed=seed)
    model.fit_features(*stack(tr))
    x, y, g = stack(te)
    return evaluate(g, y, model.predict_features(x))


def stack(rows: list) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """(features, latencies, group keys) of task rows."""
    x = np.concatenate([r[3] for r in rows])
    y = np.concatenate([r[4] for r in rows])
    g = [f"{r[0]}@{r[1]}" for r in rows for _ in range(len(r[4]))]
    return x, y, g


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--name", default="default")
    ap.add_argument("--kind", default="xgb", choices=("xgb", "xgb-rank"))
    ap.add_argument("--per-task", type=int, default=40)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="llama-tiny only")
    a = ap.parse_args()
    t0 = time.time()
    hws, ws = hardware_set(), workloads(a.quick)
    jobs = [(w.to_dict(), hn, hd, a.per_task, a.seed * 7919 + i)
            for i, (w, (hn, hd)) in enumerate((w, h) for w in ws for h in hws.items())]
    with ProcessPoolExecutor(a.workers) as pool:
        out = list(pool.map(job, jobs, chunksize=2))
    rows = [r for r in out if len(r[4]) >= 2]
    for r in out:
        if r[2].startswith("skipped"):
            print(f"  {r[0]} on {r[1]}: {r[2]}")
    x, y, g = stack(rows)
    fams = sorted({r[2] for r in rows})
    print(f"{len(ws)} workloads x {len(hws)} hardware -> {len(rows)} tasks, {len(y)} samples "
          f"({int(np.isfinite(y).sum())} measured), families {fams}, {time.time() - t0:.0f} s")
    rng = np.random.default_rng(a.seed)
    keys = sorted({r[0] for r in rows})
    held = set(rng.choice(keys, size=max(1, len(keys) // 5), replace=False).tolist())
    report = {"held-out workloads": fit_eval(a.kind, rows, lambda r: r[0] not in held,
                                             lambda r: r[0] in held, a.seed)}
    for hn in ("aim-gddr6", "hbm-pim"):
        report[f"held-out hardware {hn}"] = fit_eval(a.kind, rows, lambda r, h=hn: r[1] != h,
                                                     lambda r, h=hn: r[1] == h, a.seed)
    for what, m in report.items():
        print(f"{what:32s} " + "  ".join(f"{k}={v:.3f}" for k, v in m.items()))
    model = (XGBRegressionModel if a.kind == "xgb" else XGBRankModel)(seed=a.seed)
    model.fit_features(x, y, g)
    model.info = {"workloads": len(ws), "hardware": sorted(hws), "tasks": len(rows),
                  "samples": int(np.isfinite(y).sum()), "families": fams,
                  "features": len(FEATURE_NAMES), "metrics": report}
    PRETRAINED_DIR.mkdir(exist_ok=True)
    path = PRETRAINED_DIR / f"{a.name}.ubj"
    model.save(path)
    print(f"saved {path} ({path.stat().st_size / 1e3:.0f} kB) in {time.time() - t0:.0f} s")


if __name__ == "__main__":
    try:
        main()
    except CostModelError as e:
        raise SystemExit(f"error: {e}") from None
