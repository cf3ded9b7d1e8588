"""Per-task search: the strategy proposes, the cost model ranks, the runner measures.

One :class:`TaskTuner` owns one workload on one hardware: its space, its measurements,
its pool of lowered candidates and its strategy (:class:`.strategy.SearchStrategy`,
a clone of the context's). Every round the strategy makes candidates pending, the cost
model ranks them (:func:`.ranking.select`), the chosen ones are measured, committed to
the database as they land and told to the strategy. A new tuner on the same database
resumes where the last one stopped and never measures a schedule twice.

The tuner is also the cost model's view of its task (:class:`.outlook.ModelView`): the
moves and surrogate picks a strategy offers the model, and the outlook the task
scheduler reads (the predicted best of an unmeasured candidate, the model's recent error
on the task).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from autosched.measure.record import Measurement
from search_spaces import Schedule, Workload
from sim import SIM_VERSION
from sim.errors import check

from ..families import family_of
from ..measure import MeasureInput
from .errors import SearchError
from .outlook import ModelView
from .pool import CandidatePool
from .ranking import select
from .training import TrainingSet

if TYPE_CHECKING:
    from .context import SearchContext

__all__ = ["TaskTuner"]


class TaskTuner(ModelView):
    """Tunes ``workload`` (occurring ``count`` times per model step) within ``ctx``.

    ``seed`` defaults to the context's (a run gives its i-th task ``ctx.seed + i``);
    ``training`` is the cost model's training set, shared by the run's tasks. The space's
    named points (the lowering's default and, where the family has one, the shipped
    library kernel) are measured first unless ``start_from_default`` is False (a cold
    search, as the search-efficiency benchmark runs every strategy); so the best schedule
    of a tuned task is never slower than the library kernel.
    """

    def __init__(self, workload: Workload, count: int, ctx: SearchContext, *,
                 seed: int | None = None, training: TrainingSet | None = None,
                 start_from_default: bool = True) -> None:
        check(isinstance(count, int) and count >= 1, f"count must be an int >= 1, got {count!r}")
        self.workload, self.count, self.ctx = workload, count, ctx
        self.hw, self.db, self.runner = ctx.hardware, ctx.database, ctx.runner
        self.cost_model, self.settings = ctx.cost_model, ctx.settings
        self.multi_objective = ctx.multi_objective
        self.seed = ctx.seed if seed is None else seed
        self.training = training if training is not None else TrainingSet()
        self.lowering = family_of(workload)
        self.space = self.lowering.space(workload, self.hw)
        self.measurements: list[Measurement] = []
        self.history: list[float] = []
        self._by_key: dict[str, Measurement] = {}
        self.pool = CandidatePool(workload, self.space, self.hw, settings=self.settings)
        self.exhausted = False
        self._predicted: dict[str, float] = {}  # score of each proposed point, by key
        self.errors: list[float] = []  # model log2 error on each measured ranked point
        self._read_stored()
        named = {k: Schedule.of(self.space, p)
                 for k, p in self.lowering.named_points(workload, self.hw).items()}
        self.default = named["default"]
        first = {s.key: s for s in named.values()} if start_from_default else {}
        self.named = {k: s.point for k, s in first.items()}
        self._first = list(first)
        self.strategy = ctx.strategy.clone()
        self.strategy.bind(self)  # it learns the stored measurements and the named points

    # ----------------------------------------------------------------- state
    @property
    def measured(self) -> int:
        """Distinct schedules measured for this task (earlier runs included)."""
        return len(self.measurements)

    @property
    def measured_keys(self) -> dict[str, Measurement]:
        """Every measurement of this task by schedule key (read-only for strategies)."""
        return self._by_key

    @property
    def best(self) -> Measurement | None:
        """The fastest successful measurement so far."""
        ok = [m for m in self.measurements if m.ok]
        return min(ok, key=lambda m: m.latency_ns) if ok else None

    @property
    def named_due(self) -> list[dict]:
        """The named points (default, library kernel) still to measure, default first."""
        return [p for k, p in self.named.items() if k not in self._by_key]

    @property
    def default_due(self) -> bool:
        """Whether the default is to be measured first and is not measured yet."""
        return bool(self._first) and self._first[0] not in self._by_key

    @property
    def named_pending(self) -> int:
        """Named points (default, library) still to measure."""
        return len(self.named_due)

    @property
    def default_measurement(self) -> Measurement | None:
        return self._by_key.get(self.default.key)

    def rule_out_named(self) -> list[str]:
        """Drop the named points still due other than the default that the cost model
        predicts slower than the default by more than ``settings.named_margin`` and its
        noise (log2): the warm-up measures a named point only where the model cannot rule
        it out. The default is always measured. Returns the keys dropped (none without a
        model that predicts latencies)."""
        model, dkey = self.cost_model, self.default.key
        due = [(k, p) for k, p in self.named.items() if k != dkey and k not in self._by_key]
        if model is None or not due or model.latency_ns(np.zeros(1)) is None:
            return []
        cands = [self.pool.candidate(p) for p in (self.default.point, *(p for _, p in due))]
        if any(c is None for c in cands):
            return []
        ns = model.latency_ns(np.asarray(model.predict(cands), dtype=float))
        margin = max(self.settings.named_margin, self.noise)
        drop = [k for (k, _), v in zip(due, ns[1:], strict=True)
                if v > 0 and ns[0] > 0 and math.log2(v / ns[0]) > margin]
        for k in drop:
            del self.named[k]
            self._first.remove(k)
        return drop

    def pareto(self) -> list[Measurement]:
        """Successful measurements no other one beats on both latency and energy."""
        ok = sorted((m for m in self.measurements if m.ok),
                    key=lambda m: (m.latency_ns, m.energy_pj))
        front: list[Measurement] = []
        for m in ok:
            if not front or m.energy_pj < front[-1].energy_pj:
                front.append(m)
        return front

    def rng(self, stream: int) -> np.random.Generator:
        """A generator seeded by (seed, measurements so far, ``stream``): a round's draws
        depend only on the seed and the database state."""
        return np.random.default_rng([self.seed, self.measured, stream])

    def values(self, m: Measurement) -> list[float]:
        """The objective values of a successful measurement: latency (and energy)."""
        return [m.latency_ns, m.energy_pj] if self.multi_objective else [m.latency_ns]

    def expressible(self, m: Measurement) -> bool:
        """Whether ``m``'s point is still a point of the space (names, domains, conditions)."""
        return not self.space.validate(m.schedule.point, constraints=False)

    def _note(self, m: Measurement) -> None:
        self.measurements.append(m)
        self._by_key[m.schedule.key] = m
        prev = self.history[-1] if self.history else math.inf
        self.history.append(min(prev, m.latency_ns))

    def _read_stored(self) -> list[Measurement]:
        """Take in every measurement the database holds for this exact key that is not
        known yet; returns the expressible ones (the cost model's training set gets them)."""
        new = []
        for m in self.db.records(workload=self.workload, hw_fingerprint=self.hw.fingerprint,
                                 space=self.space.name, space_version=self.space.version):
            if m.sim_version != SIM_VERSION or m.schedule.key in self._by_key:
                continue
            self._note(m)
            if not self.expressible(m):
                continue  # recorded under this space but no longer expressible: keep as measured
            new.append(m)
            cand = self.pool.candidate(m.schedule.point) if self.cost_model is not None else None
            if cand is not None:
                self.training.add(cand, m.latency_ns)
        return new

    def resume(self) -> None:
        """Take in what the database gained for this task since (other processes' work)."""
        self.strategy.observe(self._read_stored())

    # ----------------------------------------------------------------- one round
    def propose(self, n_measure: int, n_explore: int | None = None) -> list[MeasureInput]:
        """Up to ``n_measure`` distinct unmeasured valid schedules to measure next.

        The strategy makes its candidates pending; the named points (default, library
        kernel) due come first; without a cost model the rest keep the strategy's order,
        with one the model ranks them and its top ``n_measure - n_explore`` plus
        ``n_explore`` (default ``settings.n_explore``) random others are kept. An empty
        list means the space is exhausted. Call :meth:`record` with the results.
        """
        n_explore = self.settings.n_explore if n_explore is None else n_explore
        if n_measure < 1 or n_explore < 0:
            raise SearchError(f"need n_measure >= 1 and n_explore >= 0, got {n_measure}, "
                              f"{n_explore}")
        check(not self.pool.pending, "record() the previous proposal before proposing again")
        if self.exhausted:
            return []
        self.strategy.propose(n_measure)
        keys = list(self.pool.pending)
        cands = [self.pool.pending[k].candidate for k in keys]
        chosen, scores = select(keys, cands, self.cost_model, n_measure, n_explore,
                                first=self._first, rng=self.rng(1))
        self._predicted.update(scores)
        if not chosen:
            self.exhausted = True  # the strategy found no new point
        self.pool.drop([k for k in keys if k not in chosen])
        out = []
        for k in chosen:
            entry = self.pool.pending[k]
            program = entry.candidate.program if entry.candidate is not None else None
            out.append(MeasureInput(self.workload, Schedule.of(self.space, entry.point),
                                    self.hw, program))
        return out

    def record(self, measurements: Sequence[Measurement], *, refit: bool = True) -> None:
        """Commit each measurement, then tell the strategy, then (``refit``) refit the cost
        model; a scheduler recording several tasks at once refits the shared model once."""
        check(len(measurements) == len(self.pool.pending),
              f"record() got {len(measurements)} measurements for {len(self.pool.pending)} "
              "proposed schedules")
        for m in measurements:
            entry = self.pool.pending.pop(m.schedule.key)
            self.db.commit(m)
            self._note(m)
            predicted = self._predicted.pop(m.schedule.key, None)
            if predicted is not None and m.ok and self.cost_model is not None:
                ns = self.cost_model.latency_ns(np.asarray([predicted]))
                if ns is not None and ns[0] > 0:
                    self.errors.append(float(np.log2(ns[0] / m.latency_ns)))
            if entry.candidate is not None:
                self.training.add(entry.candidate, m.latency_ns)
        self._predicted.clear()
        self.strategy.update(measurements)
        if refit and self.cost_model is not None and measurements:
            self.training.refit(self.cost_model)

    def step(self, n_measure: int, n_explore: int | None = None) -> list[Measurement]:
        """Propose, measure in one runner batch, record; returns the new measurements."""
        inputs = self.propose(n_measure, n_explore)
        if not inputs:
            return []
        ms = self.runner.run(inputs)
        self.record(ms)
        return ms
