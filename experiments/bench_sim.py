"""Simulator benchmark: library GEMVs of LLM shapes on every preset.

Prints, per preset and shape, the simulated latency, the analytical bound, the
plain-memory baseline (the same device as ordinary DRAM, weights streamed to the host),
the PIM speedup over that baseline and the simulator's own wall time; then the speed of
the simulator itself (extrapolated and unrolled). The GEMV cases are the regression
suite's (``autosched regress --suite full`` gates the same figures) and run through its
runner; ``--markdown`` prints the README's table.

    python experiments/bench_sim.py [--json | --markdown] [--presets hbm-pim,aim-gddr6]
"""

from __future__ import annotations

import argparse
import json
import time

from autosched.regress import KernelCase, run_case
from autosched.regress.suites import GEMV_BATCHES, GEMV_SHAPES
from autosched.regress.tables import gemv_table
from sim.hardware import Hardware
from sim.hwio import list_device_presets, load_hardware
from sim.isa import Act, Mac, Pre, aff
from sim.kernels import gemv
from sim.program import Loop, Program, Stream
from sim.timing import simulate


def _single_column_program(hw: Hardware, rows: int) -> Program:
    """One channel, every column a separate command: the engine's per-command path."""
    cols = tuple(Mac(0, hw.pim.banks_per_unit, c, 1, 0, 0, "lane" if not hw.pim.adder_tree
                     else "dot") for c in range(hw.columns_per_row))
    body = Loop("r", rows, (Act(0, 1, aff(0, r=1)), *cols, Pre(0, 1)))
    return Program((Stream("pim", "pim", (0,), (body,)),), ())


def speed(hw_name: str) -> list[dict]:
    """Wall time of the headline GEMV sizes (extrapolated), agreement with the unrolled
    run, and the unrolled engine's rate in commands it actually simulates per second."""
    hw = load_hardware(hw_name)
    out = []
    for n, k in ((4096, 4096), (16384, 4096)):
        prog = gemv(hw, n, k).program
        t0 = time.perf_counter()
        fast = simulate(prog, hw)
        t1 = time.perf_counter()
        slow = simulate(prog, hw, extrapolate=False)
        out.append({"hw": hw_name, "shape": f"{n}x{k}", "extrapolated_s": t1 - t0,
                    "agreement": fast.latency_ns / slow.latency_ns})
    prog = _single_column_program(hw, 4000)
    t0 = time.perf_counter()
    res = simulate(prog, hw, extrapolate=False)
    rate = res.total_commands / (time.perf_counter() - t0)
    for row in out:
        row["unrolled_cmds_per_s"] = rate
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--markdown", action="store_true", help="the README's table")
    ap.add_argument("--presets", default=",".join(list_device_presets()))
    args = ap.parse_args()
    rows = [run_case(KernelCase(hw, n, k, b)) for hw in args.presets.split(",")
            for (n, k) in GEMV_SHAPES for b in GEMV_BATCHES]
    failed = [r for r in rows if not r.ok]
    if failed:
        raise SystemExit("\n".join(f"{r.case}: {r.error}" for r in failed))
    if args.markdown:
        print(gemv_table(rows))
        return
    speeds = [s for hw in args.presets.split(",") for s in speed(hw)]
    if args.json:
        print(json.dumps({"gemv": {r.case: r.to_dict() for r in rows}, "speed": speeds},
                         indent=2))
        return
    print(f"{'case':<38} {'latency us':>11} {'bound us':>9} {'lat/bound':>9} "
          f"{'baseline us':>11} {'speedup':>8} {'sim s':>6}")
    for r in rows:
        f, i = r.figures, r.info
        print(f"{r.case:<38} {f['latency_ns'] / 1e3:>11.2f} {f['bound_ns'] / 1e3:>9.2f} "
              f"{i['latency_over_bound']:>9.2f} {f['baseline_ns'] / 1e3:>11.2f} "
              f"{i['speedup']:>8.2f} {r.wall['simulate_s']:>6.3f}")
    print()
    print(f"{'hw':<10} {'shape':>11} {'sim s':>9} {'extrap/unrolled':>15} "
          f"{'unrolled cmds/s (1 col each)':>29}")
    for s in speeds:
        print(f"{s['hw']:<10} {s['shape']:>11} {s['extrapolated_s']:>9.4f} "
              f"{s['agreement']:>15.4f} {s['unrolled_cmds_per_s']:>29,.0f}")


if __name__ == "__main__":
    main()
