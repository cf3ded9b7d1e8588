"""The task scheduler: one measurement budget spent over many tasks where it pays most.

A round picks one task and measures a batch of its proposals. With a cost model that
predicts latencies (:meth:`TaskTuner.outlook`), a task's score is its *predicted
end-to-end gain*: (measured best - the model's predicted best of an unmeasured
candidate) x the task's weight in the step, in ns per step. A task whose predicted
relative gain is below the model's noise on it is *settled*: it gets nothing while
another task has a predicted gain. Once every task of the plans in contention is settled,
the rest of the budget goes by Ansor's score below to the tasks on which the model's
error is above its floor (gains hidden by that noise may be real); when there are none,
the run stops early. A task is settled only once the model has
predicted at least two of its measurements: until then its gain is at least its weight x
best x the model's prior noise, so every task of a plan in contention gets one round
before the model's word on it counts. Without such a model the score is Ansor's:
``count x best latency x max(recent relative improvement, floor)``.

Fusion plans: ``plans`` lists, per plan, the tasks its graph runs and how often. A plan
is *in contention* while its optimistic estimate (each task at the smaller of its
measured and predicted best) is not above the best plan's current estimate (each task at
its measured best); only tasks of plans in contention are tuned, weighted by their
largest count over those plans. The warm-up measures every task's default first, so
each plan has an estimate before any budget goes to a task. With probability
``epsilon`` a random live task is picked instead, so no live task starves; ties break
by a seeded random order.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from autosched.measure.record import Measurement
from search_spaces import Workload

from ..measure import Runner
from .shared import Gate, Solo
from .study import SearchError
from .tuner import NOISE_FLOOR, TaskTuner

__all__ = ["Progress", "TaskResult", "TaskScheduler"]


@dataclass(frozen=True)
class TaskResult:
    """What tuning one task gave: default and best measurements, how many were measured.

    ``measurements`` counts every distinct schedule measured for the task, earlier runs on
    the same database included; ``new`` only those of this run. ``history`` is the best
    latency so far after each measurement (``inf`` until the first success).
    """

    workload: Workload
    count: int
    default: Measurement | None
    best: Measurement | None
    measurements: int
    history: tuple[float, ...]
    new: int = 0
    predicted_gain_ns: float = math.nan  # per step, when the search stopped; nan: no model
    search_s: float = 0.0  # wall seconds the search spent on the task (propose, rank, fit)
    measure_s: float = 0.0  # its share of the wall seconds spent waiting for measurements

    @property
    def speedup(self) -> float:
        """Default latency over best latency (nan when either is missing)."""
        if self.default is None or self.best is None or not self.default.ok:
            return math.nan
        return self.default.latency_ns / self.best.latency_ns


@dataclass(frozen=True)
class Progress:
    """Reported after every measured batch: which task, the budget, the new records."""

    task: int
    workload: Workload
    used: int
    budget: int
    best_ns: float
    new: tuple[Measurement, ...]


class TaskScheduler:
    """Allocates a budget of new measurements over ``tuners`` sharing one ``runner``."""

    def __init__(self, tuners: Sequence[TaskTuner], runner: Runner, *, seed: int = 0,
                 warmup: int = 4, batch: int = 8, window: int = 8, floor: float = 0.02,
                 epsilon: float = 0.05, plans: Sequence[Mapping[int, int]] | None = None,
                 gate: Gate | None = None) -> None:
        if warmup < 1 or batch < 1 or window < 1 or floor <= 0 or not 0 <= epsilon < 1:
            raise SearchError(f"scheduler needs warmup, batch, window >= 1, floor > 0 and "
                              f"0 <= epsilon < 1; got {warmup}, {batch}, {window}, {floor}, "
                              f"{epsilon}")
        self.tuners, self.runner = list(tuners), runner
        self.gate = gate or Solo()  # several processes on one job: .shared.SharedJob
        self.warmup, self.batch, self.window = warmup, batch, window
        self.floor, self.epsilon = floor, epsilon
        self.rng = np.random.default_rng(seed)
        self.allocated = [0] * len(self.tuners)
        self.search_s = [0.0] * len(self.tuners)
        self.measure_s = [0.0] * len(self.tuners)
        self._start = [t.measured for t in self.tuners]
        self.plans = [dict(p) for p in plans] if plans is not None else \
            [{i: t.count for i, t in enumerate(self.tuners)}]
        if any(not 0 <= i < len(self.tuners) or n < 1 for p in self.plans for i, n in p.items()):
            raise SearchError("a plan maps task indices of this scheduler to counts >= 1")

    # ----------------------------------------------------------------- plans
    def _best_ns(self, i: int) -> float:
        b = self.tuners[i].best
        return b.latency_ns if b is not None else math.inf

    def _hope_ns(self, i: int) -> float:
        """The optimistic latency of task ``i``: its predicted best when below the measured
        best, else the measured best less the floor."""
        best, out = self._best_ns(i), self.tuners[i].outlook()
        if out is not None:
            return min(best, out[0])
        return best * (1.0 - self.floor) if math.isfinite(best) else 0.0

    def estimates(self) -> list[tuple[float, float]]:
        """Per plan, (step estimate with the measured bests, optimistic estimate) in ns: the
        sums of count x latency over its tasks."""
        return [(sum(n * self._best_ns(i) for i, n in p.items()),
                 sum(n * self._hope_ns(i) for i, n in p.items())) for p in self.plans]

    def contention(self) -> list[int]:
        """Indices of the plans still in contention (all of them while one lacks a measured
        estimate)."""
        est = self.estimates()
        lead = min(now for now, _ in est)
        if not math.isfinite(lead):
            return list(range(len(self.plans)))
        return [j for j, (now, hope) in enumerate(est) if hope <= lead or now == lead]

    def weights(self) -> list[int]:
        """Each task's largest count over the plans in contention (0: in none of them)."""
        w = [0] * len(self.tuners)
        for j in self.contention():
            for i, n in self.plans[j].items():
                w[i] = max(w[i], n)
        return w

    # ----------------------------------------------------------------- scores
    def gain(self, i: int, weight: int | None = None) -> float | None:
        """Predicted end-to-end gain of task ``i`` in ns per step (0 when settled: below
        the model's noise); None without a model that predicts latencies."""
        t = self.tuners[i]
        out = t.outlook()
        if out is None:
            return None
        best = self._best_ns(i)
        if not math.isfinite(best):
            return math.inf if not t.exhausted else 0.0
        predicted, noise = out
        w = self.weights()[i] if weight is None else weight
        unproven = max(t.noise * best, 0.0) if len(t.errors) < 2 else 0.0
        if predicted <= 0 or math.log2(best / predicted) < noise:
            return w * unproven
        return w * max(best - predicted, unproven)

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
        t = self.tuners[i]
        best = t.best.latency_ns if t.best else max(t.lowering.bound(t.workload, t.hw), 1.0)
        h = [x for x in t.history if math.isfinite(x)]
        if len(h) < 2:
            gain = 1.0
        else:
            old = h[max(len(h) - 1 - self.window, 0)]
            gain = (old - h[-1]) / old
        return w * best * max(gain, self.floor)

    def _pick(self) -> int | None:
        w = self.weights()
        scores = {i: self.score(i, w[i]) for i, t in enumerate(self.tuners)
                  if not t.exhausted and w[i]}
        if scores and not any(scores.values()):  # all settled: spend the rest where noisy
            scores = {i: self.recent(i, w[i]) for i in scores
                      if self.tuners[i].noise > NOISE_FLOOR}
        live = [i for i, v in scores.items() if v > 0 and not self.gate.blocked(self.tuners[i])]
        if not live:
            return None
        order = self.rng.permutation(len(self.tuners))
        if self.rng.random() < self.epsilon:
            return live[int(self.rng.integers(len(live)))]
        return max(live, key=lambda i: (scores[i], -order[i]))

    def _measure(self, picks: list[tuple[int, int]], used: int, budget: int,
                 progress: Callable[[Progress], None] | None) -> int:
        """Propose for each (task, n) the gate grants, run everything as one batch, record,
        settle with the gate, then refit each cost model once; returns the number measured."""
        picks = [(i, k) for i, n in picks if (k := self.gate.grant(self.tuners[i], n))]
        t0 = time.perf_counter()
        props = [(i, self.tuners[i].propose(n)) for i, n in picks]
        flat = [inp for _, inputs in props for inp in inputs]
        t1 = time.perf_counter()
        results = self.runner.run(flat) if flat else []
        t2 = time.perf_counter()
        at = 0
        for i, inputs in props:
            ms, at = results[at: at + len(inputs)], at + len(inputs)
            self.tuners[i].record(ms, refit=False)
            self.gate.settle(self.tuners[i], ms)
            self.allocated[i] += len(ms)
            used += len(ms)
            if progress is not None and ms:
                best = self.tuners[i].best
                progress(Progress(i, self.tuners[i].workload, used, budget,
                                  best.latency_ns if best else math.inf, tuple(ms)))
        refits = {id(t.training): t for i, _ in props if (t := self.tuners[i]).cost_model}
        for t in refits.values():
            t.training.refit(t.cost_model)
        own, share = t1 - t0 + time.perf_counter() - t2, max(len(flat), 1)
        for i, inputs in props:
            self.search_s[i] += own * len(inputs) / share
            self.measure_s[i] += (t2 - t1) * len(inputs) / share
        return len(flat)

    def run(self, budget: int, progress: Callable[[Progress], None] | None = None
            ) -> list[TaskResult]:
        """Measure up to ``budget`` new schedules in total; stops early once every task of
        the plans in contention is exhausted or settled by a model exact on it."""
        if budget < 0:
            raise SearchError(f"the budget must be >= 0 measurements, got {budget}")
        # warm-up 1: every task's named points (its default and library kernel, so every
        # plan has an estimate, no task is left with nothing measured while another has its
        # full warm-up, and no tuned task ends slower than the library)
        first = [max(t.named_pending, 1 if t.measured == 0 else 0) for t in self.tuners]
        first = [n if sum(first[:i]) + n <= budget else 0 for i, n in enumerate(first)]
        used = self._measure([(i, n) for i, n in enumerate(first) if n], 0, budget, progress)
        # warm-up 2, for tasks scored without predictions: the rest of their warm-up,
        # tasks of the plans in contention only
        w, left, picks = self.weights(), budget - used, []
        for i, t in enumerate(self.tuners):
            n = min(max(self.warmup - t.measured, 0), left) if w[i] else 0
            if n and t.outlook() is None:
                picks.append((i, n))
                left -= n
        used += self._measure(picks, used, budget, progress)
        while used < budget:
            t0 = time.perf_counter()
            i = self._pick()
            if i is None:
                if self.gate.wait():  # other processes hold what is left: look again
                    continue
                break
            self.search_s[i] += time.perf_counter() - t0
            used += self._measure([(i, min(self.batch, budget - used))], used, budget, progress)
        return self.results()

    def results(self) -> list[TaskResult]:
        """One result per tuner, with its predicted remaining gain at its weight in the
        plans in contention (nan without a latency model)."""
        w = self.weights()
        out = []
        for i, (t, s) in enumerate(zip(self.tuners, self._start, strict=True)):
            g = self.gain(i, w[i])
            out.append(TaskResult(t.workload, t.count, t.default_measurement, t.best,
                                  t.measured, tuple(t.history), t.measured - s,
                                  math.nan if g is None else g, self.search_s[i],
                                  self.measure_s[i]))
        return out
