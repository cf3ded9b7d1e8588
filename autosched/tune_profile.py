"""Serving profiles: every (phase, batch, context) bucket a server runs, tuned in one run.

A server decodes at several batch sizes and contexts and prefills prompts of several
lengths; each bucket is its own step, with its own schedules, fusion plan and placement.
:func:`tune_profile` tunes them one after the other on one database under one budget:
the budget still unspent is shared by the buckets still to tune (each takes its share
of it; what a bucket leaves unspent goes to the next), and a workload several buckets
share is measured once (the later buckets resume from its records, as a rerun does).
A bucket's final comparison also tries, on its own tuned schedules, the fusion plan and
placement each earlier bucket of its phase won (a plan that wins at one batch or context
often wins at the next, and its measurements cover it already). Every bucket's plans are
stored under its own step, where ``compile``, ``simulate`` and
``run`` find them (a step between buckets takes the nearest bucket's, see
:mod:`autosched.compiler.stored`), and each gets the never-slower-than-default comparison of
:func:`~autosched.tune.tune`.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from sim.errors import AutoschedError, SimError

from .database import Database
from .report import TuneReport

__all__ = ["Bucket", "ProfileReport", "buckets_of", "tune_profile"]


@dataclass(frozen=True)
class Bucket:
    """One step of a serving profile."""

    phase: str
    batch: int
    context: int

    def describe(self) -> str:
        return f"{self.phase} b{self.batch} {'c' if self.phase == 'decode' else 'p'}{self.context}"


@dataclass(frozen=True)
class ProfileReport:
    """Every bucket's report, in tuning order, and the run's wall time."""

    reports: tuple[TuneReport, ...]
    wall_s: float

    @property
    def measurements(self) -> int:
        return sum(r.measurements for r in self.reports)

    def to_dict(self) -> dict:
        return {"wall_s": self.wall_s, "measurements": self.measurements,
                "buckets": [r.to_dict() for r in self.reports]}


def buckets_of(phases: Sequence[str], batches: Sequence[int],
               contexts: Sequence[int]) -> list[Bucket]:
    """Every combination, each once, in the order given (prefill takes batch and prompt
    length as decode takes batch and context)."""
    out: list[Bucket] = []
    for p, b, c in itertools.product(phases, batches, contexts):
        if p not in ("decode", "prefill"):
            raise AutoschedError(f"phase {p!r} is not decode or prefill")
        bk = Bucket(p, int(b), int(c))
        if bk not in out:
            out.append(bk)
    return out


def tune_profile(model: object, buckets: Sequence[Bucket], *, trials: int,
                 db: str | Path | Database, **kw: object) -> ProfileReport:
    """Tune every bucket of ``buckets`` with one budget of ``trials`` new measurements on
    one database; ``kw`` as :func:`~autosched.tune.tune` takes them (hw, workers, seed,
    sampler, cost_model, fusion, progress, runner). Refused, before anything is measured,
    when a bucket cannot fit the hardware under any partition."""
    from sim.system import load_system

    from .compiler import unfit_reason
    from .defaults import DEFAULT_CONTEXT
    from .frontend import get_model_config
    from .pipeline import step_of
    from .tune import tune

    if not buckets:
        raise AutoschedError("a serving profile needs at least one bucket")
    if not isinstance(trials, int) or trials < 0:
        raise AutoschedError(f"trials must be a non-negative integer, got {trials!r}")
    # inputs, resolved once; every bucket must fit before any is measured
    cfg = get_model_config(model)
    system = load_system(kw.pop("hw", "hbm-pim"))
    why = [r for b in buckets if (r := unfit_reason(step_of(
        cfg, phase=b.phase, batch=b.batch, context=min(b.context or DEFAULT_CONTEXT,
                                                       cfg.max_positions)),
        system)) is not None]
    if why:
        raise SimError(f"{len(why)} of {len(buckets)} buckets cannot run on {system.name}, "
                       "nothing was measured: " + "; ".join(why))
    start = time.perf_counter()
    left, out = trials, []
    for i, b in enumerate(buckets):
        share = left // (len(buckets) - i)
        won = [(r.end_to_end.plan, r.end_to_end.placement) for r in out
               if r.phase == b.phase]
        rep = tune(cfg, hw=system, phase=b.phase, batch=b.batch, context=b.context,
                   trials=share, db=db, carry=won, **kw)
        left -= rep.measurements
        out.append(rep)
    return ProfileReport(tuple(out), time.perf_counter() - start)
