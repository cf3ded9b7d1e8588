"""Tuning on hardware nothing shipped was tuned for: a model's decode step against the
physical limit.

The physical limit of a decode step is the bytes it must read from the banks (every
GEMV weight once, the KV cache once per attention) over the device's in-bank bandwidth
(``Hardware.internal_bandwidth_gbps``): no schedule can beat it. ``autosched tune`` runs
with its defaults (fusion searched, the shipped cost model) and ``--trials`` new
measurements on an empty database; the table shows the default step, the tuned step,
the limit and tuned / limit (goal: at most 1.3 on ``experiments/hw/hbm3-pim.yaml``,
llama2-7b, 64 measurements).

    python -m experiments.bench_new_hw [--hw experiments/hw/hbm3-pim.yaml] [--model llama2-7b]
        [--trials 64] [--context 1024]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from autosched.ir import tasks
from autosched.pipeline import model_graph
from autosched.tune import tune
from search_spaces import Workload
from sim.hardware import DTYPE_BYTES, Hardware
from sim.hwio import load_hardware

HW_FILE = Path(__file__).parent / "hw" / "hbm3-pim.yaml"


def bank_bytes(w: Workload) -> float:
    """Bytes a workload must read from the banks: a GEMV's weights, attention's KV cache."""
    d, elem = w.dims, DTYPE_BYTES[w.dtype]
    if w.op == "gemv":
        return float(d["n"] * d["k"] * elem)
    if w.op == "attention":
        return float(2 * d["b"] * d["kvh"] * d["l"] * d["d"] * elem)
    return 0.0


def physical_limit_ns(model: str, hw: Hardware, context: int) -> float:
    """The unfused decode step's bank bytes over the in-bank bandwidth, in ns."""
    graph = model_graph(model, phase="decode", context=context)[1]
    total = sum(t.count * bank_bytes(t.workload) for t in tasks(graph))
    return total / hw.internal_bandwidth_gbps


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hw", default=str(HW_FILE))
    ap.add_argument("--model", default="llama2-7b")
    ap.add_argument("--trials", type=int, default=64)
    ap.add_argument("--context", type=int, default=1024)
    a = ap.parse_args()
    hw = load_hardware(a.hw)
    limit = physical_limit_ns(a.model, hw, a.context)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        rep = tune(a.model, hw=hw, context=a.context, trials=a.trials, db=Path(tmp) / "t.db")
    e = rep.end_to_end
    print(f"{'model':<10} {'hw':<10} {'meas':>5} {'default us':>11} {'tuned us':>9} "
          f"{'limit us':>9} {'tuned/limit':>11} {'default/limit':>13} {'wall s':>7}")
    print(f"{a.model:<10} {hw.name:<10} {rep.measurements:>5} {e.default_ns / 1e3:>11.1f} "
          f"{e.tuned_ns / 1e3:>9.1f} {limit / 1e3:>9.1f} {e.tuned_ns / limit:>11.3f} "
          f"{e.default_ns / limit:>13.3f} {time.perf_counter() - t0:>7.1f}")
    print(f"fusion plan {e.plan}; search {rep.search_s:.1f} s, measuring {rep.measure_s:.1f} s")


if __name__ == "__main__":
    main()
