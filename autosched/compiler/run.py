"""Greedy generation on the functional simulator, checked step by step against torch.

The program of each decode step is executed on simulated memory that keeps the weights
and the KV cache between steps; torch runs the same model in float32 on the same
(device-rounded) weights alongside and is fed the same tokens, so every step compares
like with like. The tolerance comes from the device arithmetic (see ``tolerance``).
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch

from autosched.database import Database
from autosched.frontend import ModelConfig, build_model, empty_cache, with_context
from sim.functional import DeviceMemory, execute, round_to
from sim.hardware import Hardware
from sim.hwio import load_hardware

from .compile import compile_model

__all__ = ["RunReport", "compare_step", "report", "run_check", "tolerance"]

_UNIT_ROUNDOFF = {"fp16": 2.0**-11, "bf16": 2.0**-8, "fp32": 2.0**-24}


def tolerance(cfg: ModelConfig, hw: Hardware) -> float:
    """Allowed max |logit error| relative to max |logit|.

    Each linear layer rounds its input to the device type (relative error u) and sums K
    products in the accumulator type, whose roundings add like a random walk (relative
    u_acc * sqrt(K)); both are relative to a typical output. Independent layers add in
    quadrature over the depth (two linear layers on each path of the two blocks of every
    decoder layer, plus the LM head). The max |logit| is about 3x a typical logit, which
    offsets a 3-sigma allowance for the tail, so no further factor is applied.
    """
    u = _UNIT_ROUNDOFF[hw.pim.dtype]
    u_acc = _UNIT_ROUNDOFF[hw.pim.accum_dtype]
    k = max(cfg.hidden, cfg.intermediate, cfg.q_dim)
    depth = 4 * cfg.layers + 1
    return math.sqrt(depth) * (u + u_acc * math.sqrt(k))


@dataclass(frozen=True)
class RunReport:
    """Per-step errors and tokens; ``passed`` when every step is within tolerance."""

    model: str
    hardware: str
    steps: tuple[dict, ...]
    max_abs_err: float
    max_rel_err: float
    tokens_match: bool
    tolerance: float
    passed: bool
    wall_s: float

    def to_dict(self) -> dict:
        d = asdict(self)
        d["steps"] = list(self.steps)
        return d


def _reference(cfg: ModelConfig, hw: Hardware, seed: int) -> torch.nn.Module:
    """Our torch model in float32 with weights rounded to the device type."""
    model = build_model(cfg, seed=seed).float().eval()
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.from_numpy(round_to(p.detach().numpy(), hw.pim.dtype)))
    return model


def compare_step(step: int, logits: np.ndarray, want: np.ndarray, tol: float) -> dict:
    """One step's row: errors of the device logits against torch's, and the tokens."""
    abs_err = float(np.max(np.abs(logits - want)))
    rel_err = abs_err / max(float(np.max(np.abs(want))), 1e-30)
    got_tok, ref_tok = int(np.argmax(logits)), int(np.argmax(want))
    top2 = np.sort(want)[-2:]
    # a flipped argmax only counts against the program when the reference's margin
    # exceeds what the tolerated error could close
    explained = (top2[1] - top2[0]) <= 2 * tol * float(np.max(np.abs(want)))
    return {"step": step, "token": got_tok, "ref_token": ref_tok, "max_abs_err": abs_err,
            "max_rel_err": rel_err, "match": got_tok == ref_tok,
            "flip_within_tolerance": bool(explained)}


def report(model: str, hardware: str, rows: list[dict], tol: float, t0: float) -> RunReport:
    """The report of the compared steps (``t0``: ``perf_counter`` at the start)."""
    max_rel = max(r["max_rel_err"] for r in rows)
    ok_tokens = all(r["match"] or r["flip_within_tolerance"] for r in rows)
    return RunReport(model, hardware, tuple(rows), max(r["max_abs_err"] for r in rows),
                     max_rel, all(r["match"] for r in rows), tol,
                     max_rel <= tol and ok_tokens, time.perf_counter() - t0)


def run_check(model: str | ModelConfig, hw: str | Hardware, *, steps: int = 8,
              db: str | Path | Database | None = None, seed: int = 0,
              first_token: int = 1, fusion: dict | None = None) -> RunReport:
    """Generate ``steps`` tokens greedily on the simulator and compare each step with torch."""
    hw = load_hardware(hw)
    t0 = time.perf_counter()
    first = compile_model(model, hw, db=db, context=steps, capacity=steps, fusion=fusion)
    cfg = first.cfg
    schedules = {name: c.schedule for name, c in first.choices.items()}
    ref = _reference(cfg, hw, seed)
    mem = DeviceMemory(hw)
    first.place(mem, ref)
    kc, vc = empty_cache(cfg, 1, steps, device="cpu", dtype=torch.float32)
    tol = tolerance(cfg, hw)
    token, rows = first_token, []
    for step in range(steps):
        cm = compile_model(cfg, hw, schedules=schedules,
                           graph=with_context(first.graph, step + 1))
        out = execute(cm.program, hw, mem, cm.inputs(ref, np.array([[token]]), np.array([step])))
        logits = out[cm.logits][: cfg.vocab]
        with torch.no_grad():
            ref_logits, kc, vc = ref(torch.tensor([[token]]), step, kc, vc, logits_last=True)
        rows.append(compare_step(step, logits, ref_logits.reshape(-1).numpy(), tol))
        token = rows[-1]["token"]
    return report(cfg.name, hw.name, rows, tol, t0)

