"""Greedy generation on the functional simulator, checked step by step against the
``transformers`` model itself.

The program of each decode step is executed on simulated memory that keeps the weights
and the KV cache between steps. The model (a checkpoint's, a ``transformers`` module's,
or a config's with seeded random weights) runs alongside in float32 on the values the
device holds, with its own static cache, fed the same tokens, so every step compares like
with like; the tolerance comes from the device arithmetic (see ``tolerance``). Finally
``transformers``' own greedy ``generate()`` from the same first token gives the tokens the
program's must equal.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch

from autosched.database import Database
from autosched.ir import Step
from sim.errors import InternalError
from sim.hardware import Hardware, System

from .compile import compile_step
from .partition import Partition

__all__ = ["RunReport", "compare_step", "report", "run_check", "step_outputs", "tolerance"]

_UNIT_ROUNDOFF = {"fp16": 2.0**-11, "bf16": 2.0**-8, "fp32": 2.0**-24}


def tolerance(cfg: Any, hw: Hardware) -> float:
    """Allowed max |logit error| relative to max |logit|.

    Each linear layer rounds its input to the device type (relative error u) and sums K
    products in the accumulator type, whose roundings add like a random walk (relative
    u_acc * sqrt(K)); both are relative to a typical output. Independent layers add in
    quadrature over the depth: on the attention path of every decoder layer four such
    products in series (q projection, scores against the keys the cache holds in the
    device type, the sum of the values, o projection), on the MLP path two, plus the LM
    head. (Attention's two were left out when scores stayed near zero; q/k norms make
    them order one, and the cache's rounding then shows.) The max |logit| is about 3x a
    typical logit, which offsets a 3-sigma allowance for the tail, so no further factor
    is applied.
    """
    u = _UNIT_ROUNDOFF[hw.pim.dtype]
    u_acc = _UNIT_ROUNDOFF[hw.pim.accum_dtype]
    k = max(cfg.hidden, cfg.intermediate, cfg.q_dim)
    depth = 6 * cfg.layers + 1
    return math.sqrt(depth) * (u + u_acc * math.sqrt(k))


@dataclass(frozen=True)
class RunReport:
    """Per-step errors and tokens; ``passed`` when every step is within tolerance and the
    tokens are those of ``transformers`` (or differ only where the reference's own top-2
    margin is within the tolerated error). ``generated`` are ``generate()``'s tokens."""

    model: str
    hardware: str
    steps: tuple[dict, ...]
    max_abs_err: float
    max_rel_err: float
    tokens_match: bool
    tolerance: float
    passed: bool
    wall_s: float
    generated: tuple[int, ...] = ()
    # with weights quantized on the fly: max |logit error| of the run against the float
    # model, relative to its max |logit| (what the format costs; not checked)
    fp16_max_rel_err: float | None = None

    def to_dict(self) -> dict:
        d = asdict(self)
        d["steps"] = list(self.steps)
        d["generated"] = list(self.generated)
        return d


def _generate(ref: torch.nn.Module, first_token: int, steps: int) -> tuple[int, ...]:
    """``transformers``' greedy decoding of ``steps`` tokens after ``first_token``."""
    ids = torch.tensor([[first_token]])
    with torch.no_grad():
        out = ref.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=steps,
                           min_new_tokens=steps, do_sample=False, num_beams=1,
                           pad_token_id=0)
    return tuple(int(t) for t in out[0, 1:])


def step_outputs(out: dict, logits: str, token: str, vocab: int) -> tuple[np.ndarray, int]:
    """(logits, next token) of a device's first row from its executed buffers ``out``: the
    token the program computed (its argmax op, or the LM head's last column when the
    argmax is fused there); the logits' own argmax when the program computes none."""
    row = out[logits]
    if not token:
        return row[:vocab], int(np.argmax(row[:vocab]))
    return row[:vocab], int(row[vocab] if token == logits else out[token][0])


def compare_step(step: int, logits: np.ndarray, want: np.ndarray, tol: float,
                 token: int | None = None) -> dict:
    """One step's row: errors of the device logits against the reference's, and the tokens
    (``token``: the one the device chose; it must be its own logits' argmax)."""
    abs_err = float(np.max(np.abs(logits - want)))
    rel_err = abs_err / max(float(np.max(np.abs(want))), 1e-30)
    got_tok, ref_tok = int(np.argmax(logits)), int(np.argmax(want))
    if token is not None and token != got_tok:
        raise InternalError(f"step {step}: the program chose token {token}, its own logits' "
                            f"argmax is {got_tok}")
    top2 = np.sort(want)[-2:]
    # a flipped argmax only counts against the program when the reference's margin
    # exceeds what the tolerated error could close
    explained = (top2[1] - top2[0]) <= 2 * tol * float(np.max(np.abs(want)))
    return {"step": step, "token": got_tok, "ref_token": ref_tok, "max_abs_err": abs_err,
            "max_rel_err": rel_err, "match": got_tok == ref_tok,
            "flip_within_tolerance": bool(explained)}


def reference_logits(ref: torch.nn.Module, cache: Any, token: int, step: int) -> np.ndarray:
    """The ``transformers`` model's logits for ``token`` at position ``step`` (``cache``:
    its static KV cache, advanced by the call)."""
    with torch.no_grad():
        out = ref(input_ids=torch.tensor([[token]]), cache=cache, use_cache=True,
                  position_ids=torch.tensor([[step]]))
    return out.logits[0, -1].float().numpy()


def report(model: str, hardware: str, rows: list[dict], tol: float, t0: float,
           generated: tuple[int, ...], fp16_err: float | None = None) -> RunReport:
    """The report of the compared steps (``t0``: ``perf_counter`` at the start;
    ``generated``: the reference's own greedy tokens)."""
    max_rel = max(r["max_rel_err"] for r in rows)
    same = tuple(r["token"] for r in rows) == generated
    ok_tokens = same or all(r["match"] or r["flip_within_tolerance"] for r in rows)
    return RunReport(model, hardware, tuple(rows), max(r["max_abs_err"] for r in rows),
                     max_rel, same, tol, max_rel <= tol and ok_tokens,
                     time.perf_counter() - t0, generated, fp16_err)


def run_check(model: Any, system: System, *, partition: Partition | None = None,
              steps: int = 8, db: Database | None = None, seed: int = 0,
              first_token: int = 1, fusion: dict | None = None,
              schedules: str | dict | None = None, quantize: str | None = None) -> RunReport:
    """Generate ``steps`` tokens greedily on every device of ``system`` under
    ``partition`` (None: one device) and compare each step with the ``transformers``
    model (``model``: name, config.json, checkpoint folder, config or ``transformers``
    model; ``seed`` draws the weights when there are none). Each device keeps its own
    weights and KV cache between steps; the logits the last stage gathers are compared.
    ``fusion``: a plan (what tensor parallelism cannot fuse is left unfused);
    ``schedules="library"`` runs the shipped library kernels instead of the database's (a
    node name -> schedule mapping: those schedules, the others looked up);
    ``quantize`` (``w8``, ``w4g128``...) rounds every linear but the LM head to that format
    first (the reference runs the same rounded weights) and reports the error against the
    float model too."""
    from transformers import StaticCache

    from autosched.frontend.source import load_source
    from autosched.pipeline import with_context

    hw = system.device
    t0 = time.perf_counter()
    src = load_source(model, dtype=hw.pim.dtype, seed=seed, quantize=quantize)
    cfg, ref = src.cfg, src.reference
    step0 = Step(cfg, "decode", 1, steps)
    first = compile_step(step0, system, partition=partition, db=db, fusion=fusion,
                         schedules=schedules)
    part = first.partition
    chosen = {name: c.schedule for name, c in first.choices.items()}
    mems = first.memories()
    first.place(mems, src.weights)
    cache = StaticCache(config=ref.config, max_cache_len=steps)
    fref = src.float_reference
    fcache = StaticCache(config=ref.config, max_cache_len=steps) if fref is not None else None
    ferr = 0.0
    tol = tolerance(cfg, hw)
    token, rows = first_token, []
    for step in range(steps):
        cs = compile_step(step0, system, partition=part, schedules=chosen,
                          graph=with_context(first.graph, step + 1))
        out = cs.outputs(cs.execute(mems, src.weights, np.array([[token]]), np.array([step])))
        logits, chosen_tok = step_outputs(out, cs.logits, cs.token, cfg.vocab)
        want = reference_logits(ref, cache, token, step)
        rows.append(compare_step(step, logits, want, tol, chosen_tok))
        if fref is not None:
            f = reference_logits(fref, fcache, token, step)
            ferr = max(ferr, float(np.max(np.abs(logits - f)) / max(np.max(np.abs(f)), 1e-30)))
        token = rows[-1]["token"]
    return report(cfg.name, system.name, rows, tol, t0, _generate(ref, first_token, steps),
                  ferr if fref is not None else None)
