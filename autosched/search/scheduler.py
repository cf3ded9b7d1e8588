"""The task scheduler: one measurement budget spent over many tasks where it pays most.

After a warm-up round (every task's default schedule plus a few, measured in one batch),
each round picks the task maximising ``count x best latency x max(recent relative
improvement, floor)``: the end-to-end nanoseconds its next batch is expected to save, as
in Ansor's gradient scheduler. With probability ``epsilon`` a random live task is picked
instead, so no task starves; ties break by a seeded random order.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from autosched.measure.record import Measurement
from search_spaces import Workload

from ..measure import Runner
from .shared import Gate, Solo
from .study import SearchError
from .tuner import TaskTuner

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
                 epsilon: float = 0.05, gate: Gate | None = None) -> None:
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
        self._start = [t.measured for t in self.tuners]

    def score(self, i: int) -> float:
        """Expected end-to-end gain of tuning task ``i`` next (ns per step, up to a factor)."""
        t = self.tuners[i]
        best = t.best.latency_ns if t.best else max(t.lowering.bound(t.workload, t.hw), 1.0)
        h = [x for x in t.history if math.isfinite(x)]
        if len(h) < 2:
            gain = 1.0
        else:
            old = h[max(len(h) - 1 - self.window, 0)]
            gain = (old - h[-1]) / old
        return t.count * best * max(gain, self.floor)

    def _pick(self) -> int | None:
        live = [i for i, t in enumerate(self.tuners) if not t.exhausted
                and not self.gate.blocked(t)]
        if not live:
            return None
        order = self.rng.permutation(len(self.tuners))
        if self.rng.random() < self.epsilon:
            return live[int(self.rng.integers(len(live)))]
        return max(live, key=lambda i: (self.score(i), -order[i]))

    def _measure(self, picks: list[tuple[int, int]], used: int, budget: int,
                 progress: Callable[[Progress], None] | None) -> int:
        """Propose for each (task, n), run everything as one batch, record; returns count."""
        picks = [(i, k) for i, n in picks if (k := self.gate.grant(self.tuners[i], n))]
        props = [(i, self.tuners[i].propose(n)) for i, n in picks]
        flat = [inp for _, inputs in props for inp in inputs]
        results = self.runner.run(flat) if flat else []
        at = 0
        for i, inputs in props:
            ms, at = results[at: at + len(inputs)], at + len(inputs)
            self.tuners[i].record(ms)
            self.gate.settle(self.tuners[i], ms)
            self.allocated[i] += len(ms)
            used += len(ms)
            if progress is not None and ms:
                best = self.tuners[i].best
                progress(Progress(i, self.tuners[i].workload, used, budget,
                                  best.latency_ns if best else math.inf, tuple(ms)))
        return len(flat)

    def run(self, budget: int, progress: Callable[[Progress], None] | None = None
            ) -> list[TaskResult]:
        """Measure up to ``budget`` new schedules in total; stops early once all are exhausted."""
        if budget < 0:
            raise SearchError(f"the budget must be >= 0 measurements, got {budget}")
        used = 0
        # warm-up: every task's default first (so no task is left with nothing measured
        # while another has its full warm-up), then the rest of each task's warm-up
        want = [max(self.warmup - t.measured, 0) for t in self.tuners]
        first = [min(w, 1) for w in want]
        first = [n if sum(first[:i]) + n <= budget else 0 for i, n in enumerate(first)]
        left = budget - sum(first)
        rest = []
        for w, f in zip(want, first, strict=True):
            n = min(w - f, left)
            rest.append(n)
            left -= n
        picks = [(i, f + r) for i, (f, r) in enumerate(zip(first, rest, strict=True)) if f + r]
        used += self._measure(picks, used, budget, progress)
        while used < budget:
            i = self._pick()
            if i is None:
                if self.gate.wait():  # other processes hold what is left: look again
                    continue
                break
            used += self._measure([(i, min(self.batch, budget - used))], used, budget, progress)
        return self.results()

    def results(self) -> list[TaskResult]:
        return [TaskResult(t.workload, t.count, t.default_measurement, t.best, t.measured,
                           tuple(t.history), t.measured - s)
                for t, s in zip(self.tuners, self._start, strict=True)]
