"""The gain-driven task scheduler: each round to the task whose tuning pays most.

With a cost model that predicts latencies (:meth:`TaskTuner.outlook`), a task's score is
its *predicted end-to-end gain* (:meth:`TaskScheduler.gain`): (measured best - the
model's predicted best of an unmeasured candidate) x the task's weight in the step, in
ns per step. A task whose predicted relative gain is below the model's noise on it is
*settled*: it gets nothing while another task has a predicted gain. Once every task of
the plans in contention is settled, the rest of the budget goes by Ansor's score below
to the tasks on which the model's error is above its floor (gains hidden by that noise
may be real); when there are none, the run stops early. A task is settled only once the
model has predicted at least two of its measurements: until then its gain is at least
its weight x best x the model's prior noise, so every task of a plan in contention gets
one round before the model's word on it counts. Without such a model the score is
Ansor's: ``count x best latency x max(recent relative improvement, floor)`` over the
last ``window`` measurements. With probability ``epsilon`` a random live task is picked
instead, so no live task starves; ties break by a seeded random order.
"""

from __future__ import annotations

import math

from .scheduler import TaskScheduler

__all__ = ["GainScheduler"]


class GainScheduler(TaskScheduler):
    """Spends the budget by predicted end-to-end gain; see the module docstring."""

    name = "gain"

    def score(self, i: int, weight: int | None = None) -> float:
        """Expected end-to-end gain of tuning task ``i`` next (ns per step; up to a factor
        for Ansor's score); 0 for a task outside the plans in contention or settled."""
        w = self.weights()[i] if weight is None else weight
        if w == 0:
            return 0.0
        g = self.gain(i, w)
        return g if g is not None else self.recent(i, w)

    def recent(self, i: int, w: int) -> float:
        """Ansor's score of task ``i`` at weight ``w``: w x best x max(recent relative
        improvement, floor)."""
        t, s = self.tuners[i], self.settings
        best = t.best.latency_ns if t.best else max(t.lowering.bound(t.workload, t.hw), 1.0)
        h = [x for x in t.history if math.isfinite(x)]
        if len(h) < 2:
            gain = 1.0
        else:
            old = h[max(len(h) - 1 - s.window, 0)]
            gain = (old - h[-1]) / old
        return w * best * max(gain, s.floor)

    def pick(self) -> int | None:
        w = self.weights()
        scores = {i: self.score(i, w[i]) for i, t in enumerate(self.tuners)
                  if not t.exhausted and w[i]}
        if scores and not any(scores.values()):  # all settled: spend the rest where noisy
            scores = {i: self.recent(i, w[i]) for i in scores
                      if self.tuners[i].noise > self.settings.noise_floor}
        live = [i for i, v in scores.items() if v > 0 and not self.gate.blocked(self.tuners[i])]
        if not live:
            return None
        order = self.rng.permutation(len(self.tuners))
        if self.rng.random() < self.settings.epsilon:
            return live[int(self.rng.integers(len(live)))]
        return max(live, key=lambda i: (scores[i], -order[i]))
