"""Whole-model compile and simulation of 7B-class ``transformers`` modules built on meta.

Per model and preset: the user's module (``LlamaForCausalLM`` & co. created under
``torch.device("meta")``: no weights in RAM) handed to ``simulate_model``, which captures
it, compiles the decode step and times it on the cycle-level simulator. Prints the
simulated latency and bound, the wall and CPU time of the call and the process's peak
resident memory (a 7B model's FP16 weights alone would be 13 GB).

    python -m experiments.bench_module [--models llama2-7b,mistral-7b-v0.1,qwen2-7b]
                                       [--context 1024] [--presets hbm-pim]
"""

from __future__ import annotations

import argparse
import resource
import time
from pathlib import Path

import torch
import transformers

from autosched.api import simulate_model
from autosched.frontend import get_model_config
from autosched.frontend.hf_config import to_hf
from autosched.frontend.module import module_class

CONFIGS = Path(__file__).parent / "configs"


def meta_module(name: str) -> torch.nn.Module:
    """The ``transformers`` module of a built-in name or ``experiments/configs`` stem, on meta."""
    path = CONFIGS / f"{name}.json"
    cfg = get_model_config(str(path) if path.is_file() else name)
    transformers.logging.set_verbosity_error()
    with torch.device("meta"):
        return module_class(cfg)(to_hf(cfg)).eval()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="llama2-7b,mistral-7b-v0.1,qwen2-7b")
    ap.add_argument("--presets", default="hbm-pim")
    ap.add_argument("--context", type=int, default=1024)
    args = ap.parse_args()
    print(f"{'model':<16} {'hw':<10} {'latency us':>11} {'bound us':>9} {'wall s':>7} "
          f"{'cpu s':>6} {'peak RSS MB':>12}")
    for name in args.models.split(","):
        module = meta_module(name)
        for hw in args.presets.split(","):
            c0, t0 = time.process_time(), time.perf_counter()
            f = simulate_model(module, hw, context=args.context, db=None)
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            print(f"{name:<16} {hw:<10} {f.latency_ns / 1e3:>11.1f} {f.bound_ns / 1e3:>9.1f} "
                  f"{wall:>7.1f} {cpu:>6.1f} {rss:>12.0f}", flush=True)


if __name__ == "__main__":
    main()
