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
import torch

from autosched.database import Database
from autosched.frontend import ModelConfig, empty_cache, with_context
from sim.functional import DeviceMemory, execute_system
from sim.hardware import System
from sim.system import load_system

from .partition import Partition
from .run import RunReport, _reference, compare_step, report, tolerance
from .system_compile import compile_system

__all__ = ["run_check_system"]


def run_check_system(model: str | ModelConfig, system: str | Path | System, part: Partition, *,
                     steps: int = 8, db: str | Path | Database | None = None, seed: int = 0,
                     first_token: int = 1) -> RunReport:
    """Generate ``steps`` tokens greedily on every device and compare each step with torch."""
    system = load_system(system)
    hw = system.device
    t0 = time.perf_counter()
    first = compile_system(model, system, part, db=db, context=steps, capacity=steps)
    cfg = first.cfg
    schedules = {name: c.schedule for cm in first.stages for name, c in cm.choices.items()}
    ref = _reference(cfg, hw, seed)
    mems = {d: DeviceMemory(hw) for d in range(part.devices)}
    first.place(mems, ref)
    kc, vc = empty_cache(cfg, 1, steps, device="cpu", dtype=torch.float32)
    tol = tolerance(cfg, hw)
    token, rows = first_token, []
    for step in range(steps):
        cs = compile_system(cfg, system, part, schedules=schedules,
                            graph=with_context(first.graph, step + 1))
        out = execute_system(cs.program, system, mems,
                             cs.inputs(ref, np.array([[token]]), np.array([step])))
        logits = out[cs.last_device][cs.logits][: cfg.vocab]
        with torch.no_grad():
            ref_logits, kc, vc = ref(torch.tensor([[token]]), step, kc, vc, logits_last=True)
        rows.append(compare_step(step, logits, ref_logits.reshape(-1).numpy(), tol))
        token = rows[-1]["token"]
    return report(cfg.name, system.name, rows, tol, t0)
