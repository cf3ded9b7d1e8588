"""The gemv space on decode shapes: default latency, best over a sweep, and the bound.

For each preset and shape (m = 1) prints the default schedule's latency, the best latency
over every valid point that uses all channels (``--sample N``: N random valid points of
the whole space instead), the lowering's bound, the ratios, the best point and the
bound's per-resource terms.

    python experiments/bench_gemv_space.py [--sample N] [--presets hbm-pim,aim-gddr6]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from autosched.families import build, family_of
from autosched.families.gemv import gemv_bound_terms
from search_spaces import Workload
from sim.hwio import load_hardware
from sim.timing import simulate

SHAPES = [(4096, 4096), (4096, 11008), (11008, 4096)]


def sweep(w: Workload, hw, sample: int) -> tuple[float, dict, int]:
    """(best latency, best point, points simulated)."""
    space = family_of(w).space(w, hw)
    if sample:
        pts = space.sample(np.random.default_rng(0), sample)
    else:
        pts = [p for p in space.enumerate()
               if p["placement"] == "host" or p["channels"] == hw.org.channels]
    best, arg = float("inf"), {}
    for p in pts:
        lat = simulate(build(w, p, hw).program, hw).latency_ns
        if lat < best:
            best, arg = lat, p
    return best, arg, len(pts)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sample", type=int, default=0)
    ap.add_argument("--presets", default="hbm-pim,aim-gddr6")
    args = ap.parse_args()
    print(f"{'hw':<10} {'n x k':>11} {'default us':>10} {'best us':>8} {'bound us':>8} "
          f"{'def/bnd':>7} {'best/bnd':>8} {'points':>6} {'sweep s':>7}  best point; bound terms")
    for name in args.presets.split(","):
        hw = load_hardware(name)
        for n, k in SHAPES:
            w = Workload.make("gemv", m=1, n=n, k=k)
            low = family_of(w)
            dflt = simulate(build(w, None, hw).program, hw).latency_ns
            t0 = time.perf_counter()
            best, arg, npts = sweep(w, hw, args.sample)
            wall = time.perf_counter() - t0
            terms = gemv_bound_terms(w, hw)
            bnd = low.bound(w, hw)
            shown = {k_: round(v / 1e3, 2) for k_, v in terms.items()}
            print(f"{name:<10} {n:>5}x{k:<5} {dflt / 1e3:>10.2f} {best / 1e3:>8.2f} "
                  f"{bnd / 1e3:>8.2f} {dflt / bnd:>7.2f} {best / bnd:>8.2f} {npts:>6} "
                  f"{wall:>7.1f}  {arg}; {shown}")


if __name__ == "__main__":
    main()
