"""The round-robin task scheduler: every live task in turn, a baseline for the gain one."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from .scheduler import TaskScheduler
from .tuner import TaskTuner

if TYPE_CHECKING:
    from .context import SearchContext

__all__ = ["RoundRobinScheduler"]


class RoundRobinScheduler(TaskScheduler):
    """Gives each round to the next task, in task order, that is live: in a plan still in
    contention, not exhausted and not held by another process. Ignores gains and counts:
    the comparison that shows what the gain-driven scheduler's choices are worth."""

    name = "round-robin"

    def __init__(self, tuners: Sequence[TaskTuner], ctx: SearchContext) -> None:
        super().__init__(tuners, ctx)
        self._next = 0

    def pick(self) -> int | None:
        w, n = self.weights(), len(self.tuners)
        for step in range(n):
            i = (self._next + step) % n
            t = self.tuners[i]
            if w[i] and not t.exhausted and not self.gate.blocked(t):
                self._next = i + 1
                return i
        return None
