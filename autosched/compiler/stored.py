"""The plans ``tune`` stored for a step, or for the stored bucket nearest it.

A serving profile tunes a few buckets (phase, batch, context); a server then runs steps
between them. A step with plans of its own takes them; any other takes the plans of the
bucket of its model and phase nearest to it on this hardware, nearest by the summed
``|log|`` ratio of batch and context (a step twice the batch is as far as one of twice
the context), ties to the smaller bucket. A step takes the placement plan of its own
bucket, else the nearest one's; the fusion plan (chosen per batch, for every context) of
its own batch, else the batch of that bucket. What was taken is said
(:attr:`StoredPlans.note`), so that ``compile``, ``simulate`` and ``run`` can print it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from autosched.database import Database
from autosched.ir import PlanKey, PlanKind, Step
from sim.hardware import Hardware

__all__ = ["StoredPlans", "bucket_distance", "stored_plans"]


@dataclass(frozen=True)
class StoredPlans:
    """The fusion and placement plans found for a step (None: none stored), and the
    bucket whose placement plan it takes (None: its own, or nothing found)."""

    fusion: dict | None = None
    placement: dict | None = None
    bucket: PlanKey | None = None
    asked: str = ""

    @property
    def note(self) -> str:
        """One line for the user: whose plans these are."""
        if self.bucket is not None:
            b = self.bucket
            return (f"plans of the nearest tuned bucket, {_bucket(b.phase, b.batch, b.context)}"
                    f" ({self.asked} has none of its own)")
        if self.fusion is not None or self.placement is not None:
            return f"plans tuned for {self.asked}"
        return "no tuned plans for this model and phase"


def _bucket(phase: str, batch: int, context: int | None) -> str:
    """``decode batch 8 context 1024`` / ``prefill batch 1 prompt 128``, as
    :meth:`~autosched.ir.Step.describe` words a step."""
    return f"{phase} batch {batch} {'context' if phase == 'decode' else 'prompt'} {context}"


def bucket_distance(a: PlanKey, batch: int, context: int) -> float:
    """Summed ``|log|`` ratio of batch and context between a placement key and a step."""
    return abs(math.log(a.batch / batch)) + abs(math.log((a.context or 1) / context))


def stored_plans(db: Database | None, step: Step | None, hw: Hardware) -> StoredPlans:
    """The plans stored for ``step`` on ``hw``: its own where it has them, else those of
    the nearest stored bucket of its model and phase."""
    if db is None or step is None:
        return StoredPlans()
    asked = _bucket(step.phase, step.batch, step.context)
    own_f = db.plan(str(PlanKey.of(PlanKind.FUSION, step)), hw.fingerprint)
    own_p = db.plan(str(PlanKey.of(PlanKind.PLACEMENT, step)), hw.fingerprint)
    if own_p is not None:
        return StoredPlans(own_f, own_p, None, asked)
    keys = [k for k in map(PlanKey.parse, db.plan_keys(hw.fingerprint))
            if k is not None and k.kind is PlanKind.PLACEMENT and k.model == step.name
            and k.phase == step.phase]
    if not keys:
        return StoredPlans(own_f, None, None, asked)
    near = min(keys, key=lambda k: (bucket_distance(k, step.batch, step.context),
                                    k.batch, k.context))
    if own_f is None:
        own_f = db.plan(str(PlanKey(PlanKind.FUSION, near.model, near.phase, near.batch)),
                        hw.fingerprint)
    return StoredPlans(own_f, db.plan(str(near), hw.fingerprint), near, asked)
