"""The task scheduler: one measurement budget spent over many tasks, one task per round.

:class:`TaskScheduler` is the interface: implementations differ only in which task a
round goes to (:meth:`TaskScheduler.pick`): :class:`.gain.GainScheduler` where the
predicted end-to-end gain is largest, :class:`.round_robin.RoundRobinScheduler` every
live task in turn. Everything else is shared: the warm-up, batching a round's
proposals into one runner call, the gate of a job shared by several processes, and the
fusion plans.

Fusion plans: ``ctx.plans`` lists, per plan, the tasks its graph runs (by workload key)
and how often. A plan is *in contention* while its optimistic estimate (each task at
the smaller of its measured and predicted best) is not above the best plan's current
estimate (each task at its measured best); only tasks of plans in contention are tuned,
weighted by their largest count over those plans. The warm-up measures every task's
default first (and its library kernel unless the cost model rules it out: predicted
slower than the default by more than ``settings.named_margin``), so each plan has an
estimate before any budget goes to a task.
"""

from __future__ import annotations

import abc
import math
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from .errors import SearchError
from .results import Progress, TaskResult
from .shared import Solo
from .tuner import TaskTuner

if TYPE_CHECKING:
    from .context import SearchContext

__all__ = ["Progress", "TaskResult", "TaskScheduler"]


class TaskScheduler(abc.ABC):
    """Allocates a budget of new measurements over ``tuners`` within ``ctx``.

    Contract: built once per run over the run's tuners; :meth:`run` is called once and
    drives every measurement through ``ctx.runner`` (borrowed: the caller closes it) and
    ``ctx.gate`` (a lone run's :class:`~.shared.Solo` when None). :meth:`pick` names the
    task of the next round (None: nothing left worth measuring). Deterministic for
    ``ctx.seed`` and the database state (its only randomness is a generator seeded with
    it); not thread-safe.
    """

    name = "scheduler"

    def __init__(self, tuners: Sequence[TaskTuner], ctx: SearchContext) -> None:
        self.tuners, self.ctx, self.runner = list(tuners), ctx, ctx.runner
        self.gate = ctx.gate or Solo()  # several processes on one job: .shared.SharedJob
        self.warmup, self.batch, self.settings = ctx.warmup, ctx.batch, ctx.settings
        self.rng = np.random.default_rng(ctx.seed)
        self.allocated = [0] * len(self.tuners)
        self.search_s = [0.0] * len(self.tuners)
        self.measure_s = [0.0] * len(self.tuners)
        self._start = [t.measured for t in self.tuners]
        index = {t.workload.key: i for i, t in enumerate(self.tuners)}
        if ctx.plans is None:
            self.plans = [{i: t.count for i, t in enumerate(self.tuners)}]
        elif any(k not in index for p in ctx.plans for k in p):
            raise SearchError("a plan names a workload that is not one of the tasks")
        else:
            self.plans = [{index[k]: n for k, n in p.items()} for p in ctx.plans]
        if any(n < 1 for p in self.plans for n in p.values()):
            raise SearchError("a plan maps workload keys of the tasks to counts >= 1")

    @abc.abstractmethod
    def pick(self) -> int | None:
        """The index of the task the next round goes to, or None to stop."""

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
        return best * (1.0 - self.settings.floor) if math.isfinite(best) else 0.0

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

    # ----------------------------------------------------------------- rounds
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
        """Measure up to ``budget`` new schedules in total; stops early once :meth:`pick`
        finds no task worth a round."""
        if budget < 0:
            raise SearchError(f"the budget must be >= 0 measurements, got {budget}")
        # warm-up 1: every task's named points (its default, so every plan has an
        # estimate and no task is left with nothing measured while another has its full
        # warm-up; its library kernel where the cost model cannot rule it out, so no tuned
        # task ends slower than a library kernel the model could not tell apart)
        for t in self.tuners:
            t.rule_out_named()
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
            i = self.pick()
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
