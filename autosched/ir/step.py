"""The step: one inference step of one model, the value every layer below the edges takes.

A :class:`Step` is resolved once, at the edge (command line, public API), from a model
name or config and the step's numbers; inner layers never re-read a model name. Plans a
tuning run stores for a step (its fusion plan, its placement plan) are found again under
a :class:`PlanKey`, a typed record of everything the plan was chosen for.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .errors import ModelError
from .graph import PHASES

if TYPE_CHECKING:
    from autosched.frontend.config import ModelConfig

__all__ = ["PlanKey", "PlanKind", "Step"]


@dataclass(frozen=True)
class Step:
    """Decode of ``batch`` sequences, one new token each, over ``context`` cached positions
    (the new one included), or prefill of ``context`` prompt tokens per sequence.
    ``capacity`` is the KV positions reserved (at least ``context``; None: ``context``)."""

    model: ModelConfig
    phase: str = "decode"
    batch: int = 1
    context: int = 1
    capacity: int | None = None

    def __post_init__(self) -> None:
        if self.phase not in PHASES:
            raise ModelError(f"phase {self.phase!r} is not one of {', '.join(PHASES)}")
        for label, v in (("batch", self.batch), ("context", self.context)):
            if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                raise ModelError(f"{label} must be a positive integer, got {v!r}")
        if self.capacity is not None and (isinstance(self.capacity, bool) or not isinstance(
                self.capacity, int) or self.capacity < self.context):
            raise ModelError(f"capacity must be an integer >= context ({self.context}), got "
                             f"{self.capacity!r}")

    @property
    def name(self) -> str:
        """The model's name."""
        return self.model.name

    @property
    def tokens(self) -> int:
        """New tokens per sequence: 1 in decode, the prompt in prefill."""
        return 1 if self.phase == "decode" else self.context

    @property
    def rows(self) -> int:
        """Activation rows of the step: ``batch * tokens``."""
        return self.batch * self.tokens

    @property
    def kv_capacity(self) -> int:
        """KV positions reserved per sequence."""
        return self.capacity or self.context

    def describe(self) -> str:
        """``llama-tiny decode batch 1 context 128``."""
        what = "context" if self.phase == "decode" else "prompt"
        return f"{self.name} {self.phase} batch {self.batch} {what} {self.context}"

    def replace(self, **changes: object) -> Step:
        """This step with ``changes`` (a new, validated value)."""
        from dataclasses import replace

        return replace(self, **changes)


class PlanKind(enum.StrEnum):
    """What a stored plan decides: the graph's fusion, or the side of every operator."""

    FUSION = "fusion"
    PLACEMENT = "placement"


@dataclass(frozen=True)
class PlanKey:
    """Where a plan chosen for one step of one model is stored (with the hardware's
    fingerprint beside it). A fusion plan holds for every context of its model, phase
    and batch (``context`` None); a placement plan is chosen per context. ``str(key)`` is
    the stored text."""

    kind: PlanKind
    model: str
    phase: str
    batch: int
    context: int | None = None

    @classmethod
    def of(cls, kind: PlanKind, step: Step) -> PlanKey:
        kind = PlanKind(kind)
        context = None if kind is PlanKind.FUSION else step.context
        return cls(kind, step.name, step.phase, step.batch, context)

    @classmethod
    def parse(cls, text: str) -> PlanKey | None:
        """The key ``str(key)`` wrote, or None for text no key writes (a model name may
        hold colons: the fields are read from the right)."""
        kind, rest = PlanKind.FUSION, text
        if text.startswith(f"{PlanKind.PLACEMENT}:"):
            kind, rest = PlanKind.PLACEMENT, text[len(f"{PlanKind.PLACEMENT}:"):]
        parts = rest.rsplit(":", 3 if kind is PlanKind.PLACEMENT else 2)
        want = 4 if kind is PlanKind.PLACEMENT else 3
        if len(parts) != want or parts[1] not in PHASES:
            return None
        nums = parts[2:]
        if not all(len(t) > 1 and t[0] == c and t[1:].isdigit()
                   for t, c in zip(nums, "bc", strict=False)):
            return None
        context = int(nums[1][1:]) if kind is PlanKind.PLACEMENT else None
        return cls(kind, parts[0], parts[1], int(nums[0][1:]), context)

    def __str__(self) -> str:
        if self.kind is PlanKind.FUSION:
            return f"{self.model}:{self.phase}:b{self.batch}"
        return f"{self.kind}:{self.model}:{self.phase}:b{self.batch}:c{self.context}"
