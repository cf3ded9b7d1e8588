"""Greedy generation of a partitioned model on the functional simulator, every device.

As :func:`autosched.compiler.run.run_check`, for a system: each device keeps its own
weights and KV cache between steps, the program of each step runs on all of them
(collectives and pipeline sends included), and the logits the last stage gathers are
compared with torch in float32 on the same device-rounded weights.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from autosched.database import Database
from autosched.frontend import ModelConfig, with_context
from autosched.frontend.source import load_source
from sim.functional import DeviceMemory, execute_system
from sim.hardware import System
from sim.system import load_system

from .partition import Partition
from .run import (
    RunReport,
    _generate,
    compare_step,
    reference_logits,
    report,
    step_outputs,
    tolerance,
)
from .system_compile import compile_system

__all__ = ["run_check_system"]


def run_check_system(model: str | ModelConfig, system: str | Path | System, part: Partition, *,
                     steps: int = 8, db: str | Path | Database | None = None, seed: int = 0,
                     first_token: int = 1, fusion: dict | None = None) -> RunReport:
    """Generate ``steps`` tokens greedily on every device and compare each step with torch
    (``fusion``: a plan; what tensor parallelism cannot fuse is left unfused)."""
    from transformers import StaticCache

    system = load_system(system)
    hw = system.device
    t0 = time.perf_counter()
    src = load_source(model, dtype=hw.pim.dtype, seed=seed)
    cfg, ref = src.cfg, src.reference
    first = compile_system(cfg, system, part, db=db, context=steps, capacity=steps,
                           fusion=fusion)
    schedules = {name: c.schedule for cm in first.stages for name, c in cm.choices.items()}
    mems = {d: DeviceMemory(hw) for d in range(part.devices)}
    first.place(mems, src.weights)
    cache = StaticCache(config=ref.config, max_cache_len=steps)
    tol = tolerance(cfg, hw)
    token, rows = first_token, []
    for step in range(steps):
        cs = compile_system(cfg, system, part, schedules=schedules,
                            graph=with_context(first.graph, step + 1))
        out = execute_system(cs.program, system, mems,
                             cs.inputs(src.weights, np.array([[token]]), np.array([step])))
        logits, chosen = step_outputs(out[cs.last_device], cs.logits, cs.stages[-1].token,
                                      cfg.vocab)
        rows.append(compare_step(step, logits, reference_logits(ref, cache, token, step), tol,
                                 chosen))
        token = rows[-1]["token"]
    return report(cfg.name, system.name, rows, tol, t0,
                  _generate(ref, first_token, steps))
