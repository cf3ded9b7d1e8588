"""A tuned step against the limits of the hardware: physical, activation-aware, refresh.

``autosched tune`` with its defaults (the default budget, fusion searched, an empty
database) on one decode step per hardware, set against three limits of the bytes the
step must read from the banks (every GEMV weight once, the KV cache once per attention;
``experiments.bench_new_hw.bank_bytes``):

* physical: those bytes over the in-bank bandwidth (``Hardware.internal_bandwidth_gbps``);
* activation-aware: plus, where a unit reads from one bank, each row's activation and
  precharge (``tRCD_MAC + tRP``: nothing can overlap them with that bank's columns); a
  bank pair can hide them, so there it equals the physical limit;
* with refresh: the activation-aware limit stretched by the all-bank refreshes it must
  span (``sim.bound.refresh_span_ns``).

    python -m experiments.bench_tune_limits [--model llama2-7b] [--context 1024]
        [--hw hbm-pim aim-gddr6 experiments/hw/hbm3-pim.yaml] [--trials 96]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from autosched.defaults import DEFAULT_TRIALS
from autosched.ir import tasks
from autosched.pipeline import model_graph
from autosched.tune import tune
from experiments.bench_new_hw import bank_bytes
from sim.bound import refresh_span_ns
from sim.hardware import Hardware
from sim.hwio import load_hardware

HW = ("hbm-pim", "aim-gddr6", str(Path(__file__).parent / "hw" / "hbm3-pim.yaml"))


def limits_ns(model: str, hw: Hardware, context: int) -> tuple[float, float, float]:
    """(physical, activation-aware, with refresh) limits of the unfused decode step."""
    graph = model_graph(model, phase="decode", context=context)[1]
    nbytes = sum(t.count * bank_bytes(t.workload) for t in tasks(graph))
    physical = nbytes / hw.internal_bandwidth_gbps
    act = physical
    if hw.pim.banks_per_unit == 1:
        rows = nbytes / hw.org.row_bytes / (hw.org.channels * hw.org.banks_per_channel)
        act += rows * (hw.timing.trcd_mac + hw.timing.trp) * hw.org.tck_ns
    return physical, act, refresh_span_ns(hw, act)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="llama2-7b")
    ap.add_argument("--context", type=int, default=1024)
    ap.add_argument("--hw", nargs="+", default=list(HW))
    ap.add_argument("--trials", type=int, default=DEFAULT_TRIALS)
    ap.add_argument("--workers", type=int, default=1)
    a = ap.parse_args()
    print(f"{'hw':<10} {'default us':>10} {'tuned us':>9} {'phys us':>8} {'act us':>8} "
          f"{'refr us':>8} {'tuned/phys':>10} {'tuned/act':>9} {'tuned/refr':>10} "
          f"{'tuned/bound':>11} {'wall s':>7}")
    for name in a.hw:
        hw = load_hardware(name)
        phys, act, refr = limits_ns(a.model, hw, a.context)
        t0 = time.perf_counter()
        with tempfile.TemporaryDirectory() as tmp:
            rep = tune(a.model, hw=hw, context=a.context, trials=a.trials,
                       db=Path(tmp) / "t.db", workers=a.workers)
        e = rep.end_to_end
        print(f"{hw.name:<10} {e.default_ns / 1e3:>10.1f} {e.tuned_ns / 1e3:>9.1f} "
              f"{phys / 1e3:>8.1f} {act / 1e3:>8.1f} {refr / 1e3:>8.1f} "
              f"{e.tuned_ns / phys:>10.3f} {e.tuned_ns / act:>9.3f} {e.tuned_ns / refr:>10.3f} "
              f"{e.tuned_ns / e.bound_ns:>11.3f} {time.perf_counter() - t0:>7.1f}", flush=True)


if __name__ == "__main__":
    main()
