"""Per-task search: Optuna proposes through ask/tell, the cost model ranks, the runner measures.

One :class:`TaskTuner` owns one workload on one hardware. Every measurement is committed
to the database as it lands and told to the study; a new tuner on the same database
resumes where the last one stopped and never measures a schedule twice.

Trials that Optuna asked but that were not measured this round carry the user attribute
``skip`` naming why (``invalid``: outside the space's constraints or rejected by the code
generator; ``duplicate``: already measured or already picked this round; ``unselected``:
ranked out by the cost model). They are told ``FAIL``, which samplers ignore, except
invalid points asked by a constrained sampler: those are told as infeasible
(:mod:`autosched.search.pool`), so TPE learns the valid region instead of wasting most
of its asks outside it. A measured failure is told ``FAIL`` with the user attribute
``error``.
"""

from __future__ import annotations

import math

import numpy as np
import optuna
from optuna.trial import TrialState

from autosched.measure.record import Measurement
from cost_models.base import CostModel
from search_spaces import Schedule, Workload
from sim import SIM_VERSION
from sim.errors import check
from sim.hardware import Hardware

from ..codegen.registry import lowering_for
from ..database import Database, open_database
from ..measure import MeasureInput, Runner
from .pool import CandidatePool
from .ranking import select
from .study import SearchError, make_sampler, make_study
from .training import TrainingSet

__all__ = ["TaskTuner"]

ASK_FACTOR = 4  # sampler asks per measurement slot (an ask costs O(trials): keep it small)
MAX_ASKS = 256  # upper bound on asks per round
WANT_FACTOR = 16  # valid proposals wanted per measurement slot when a cost model ranks them
EXTRA_FACTOR = 16  # random unmeasured valid points per slot joining the ranked proposals


class TaskTuner:
    """Tunes ``workload`` (occurring ``count`` times per model step) on ``hw``.

    The space's named points (the lowering's default and, where the family has one, the
    shipped library kernel) are measured first unless ``start_from_default`` is False (a
    cold search, as the search-efficiency benchmark runs every strategy); so the best
    schedule of a tuned task is never slower than the library kernel.
    """

    def __init__(self, workload: Workload, count: int, hw: Hardware, *, db: Database | str,
                 runner: Runner, sampler: str | optuna.samplers.BaseSampler = "tpe",
                 seed: int = 0, cost_model: CostModel | None = None,
                 multi_objective: bool = False, storage: str | None = None,
                 training: TrainingSet | None = None, start_from_default: bool = True) -> None:
        check(isinstance(count, int) and count >= 1, f"count must be an int >= 1, got {count!r}")
        self.workload, self.count, self.hw, self.seed = workload, count, hw, seed
        self.db, self.runner, self.cost_model = open_database(db), runner, cost_model
        self.multi_objective = multi_objective
        self.training = training if training is not None else TrainingSet()
        self.lowering = lowering_for(workload)
        self.space = self.lowering.space(workload, hw)
        name = (f"{workload.key}@{hw.fingerprint}/{self.space.name}v{self.space.version}"
                f"/sim{SIM_VERSION}/{'multi' if multi_objective else 'latency'}")
        self.study = make_study(make_sampler(sampler, seed, multi_objective=multi_objective),
                                multi_objective=multi_objective, storage=storage,
                                study_name=name if storage else None)
        self.measurements: list[Measurement] = []
        self.history: list[float] = []
        self._by_key: dict[str, Measurement] = {}
        self.pool = CandidatePool(self.study, workload, self.space, hw,
                                  n_objectives=2 if multi_objective else 1)
        self.exhausted = False
        self._resume()
        named = {k: Schedule.of(self.space, p)
                 for k, p in self.lowering.named_points(workload, hw).items()}
        self.default = named["default"]
        first = {s.key: s for s in named.values()} if start_from_default else {}
        self._first = list(first)
        for key, s in first.items():
            if key not in self._by_key:
                self.study.enqueue_trial(s.point)

    # ----------------------------------------------------------------- state
    @property
    def measured(self) -> int:
        """Distinct schedules measured for this task (earlier runs included)."""
        return len(self.measurements)

    @property
    def best(self) -> Measurement | None:
        """The fastest successful measurement so far."""
        ok = [m for m in self.measurements if m.ok]
        return min(ok, key=lambda m: m.latency_ns) if ok else None

    @property
    def named_pending(self) -> int:
        """Named points (default, library) still to measure."""
        return sum(k not in self._by_key for k in self._first)

    @property
    def default_measurement(self) -> Measurement | None:
        return self._by_key.get(self.default.key)

    def pareto(self) -> list[Measurement]:
        """Successful measurements no other one beats on both latency and energy."""
        ok = sorted((m for m in self.measurements if m.ok),
                    key=lambda m: (m.latency_ns, m.energy_pj))
        front: list[Measurement] = []
        for m in ok:
            if not front or m.energy_pj < front[-1].energy_pj:
                front.append(m)
        return front

    def _note(self, m: Measurement) -> None:
        self.measurements.append(m)
        self._by_key[m.schedule.key] = m
        prev = self.history[-1] if self.history else math.inf
        self.history.append(min(prev, m.latency_ns))

    def _values(self, m: Measurement) -> list[float]:
        return [m.latency_ns, m.energy_pj] if self.multi_objective else [m.latency_ns]

    def _resume(self) -> None:
        """Tell the study every measurement the database holds for this exact key."""
        known = {Schedule.of(self.space, t.params).key
                 for t in self.study.get_trials(deepcopy=False,
                                                states=(TrialState.COMPLETE, TrialState.FAIL))
                 if not t.user_attrs.get("skip")}
        for m in self.db.records(workload=self.workload, hw_fingerprint=self.hw.fingerprint,
                                 space=self.space.name, space_version=self.space.version):
            if m.sim_version != SIM_VERSION or m.schedule.key in self._by_key:
                continue
            self._note(m)
            point = m.schedule.point
            if self.space.validate(point, constraints=False):
                continue  # recorded under this space but no longer expressible: keep as measured
            if m.schedule.key not in known:
                self.study.add_trial(optuna.trial.create_trial(
                    params=point, distributions=self.space.distributions(point),
                    values=self._values(m) if m.ok else None,
                    state=TrialState.COMPLETE if m.ok else TrialState.FAIL,
                    user_attrs={} if m.ok else {"error": m.error}))
            if self.cost_model is not None and (cand := self.pool.candidate(point)) is not None:
                self.training.add(cand, m.latency_ns)

    # ----------------------------------------------------------------- one round
    def propose(self, n_measure: int, n_explore: int = 2) -> list[MeasureInput]:
        """Up to ``n_measure`` distinct unmeasured valid schedules to measure next.

        Without a cost model: the first valid ones the sampler asks (topped up with random
        valid points when it keeps repeating itself). With one: up to ``ASK_FACTOR`` asks
        per slot are lowered, ``EXTRA_FACTOR`` random unmeasured valid points per slot
        join them, and the model's top ``n_measure - n_explore`` plus ``n_explore``
        random others are kept. The enqueued named points are always kept. An empty list means
        the space is exhausted. Call :meth:`record` with the results.
        """
        if n_measure < 1 or n_explore < 0:
            raise SearchError(f"need n_measure >= 1 and n_explore >= 0, got {n_measure}, "
                              f"{n_explore}")
        check(not self.pool.pending, "record() the previous proposal before proposing again")
        if self.exhausted:
            return []
        ranked = self.cost_model is not None
        want = WANT_FACTOR * n_measure if ranked else n_measure
        for _ in range(min(ASK_FACTOR * n_measure + 32, MAX_ASKS)):
            if len(self.pool.pending) >= want:
                break
            trial = self.study.ask()
            self.pool.consider(trial, self.space.suggest(trial), self._by_key, build_it=ranked)
        rng = np.random.default_rng([self.seed, self.measured, 2])
        extra = EXTRA_FACTOR * n_measure if ranked else n_measure - len(self.pool.pending)
        for p in self.pool.unmeasured(rng, extra, self._by_key):
            self.pool.add_extra(p, build_it=ranked)
        keys = list(self.pool.pending)
        cands = [self.pool.pending[k].candidate for k in keys]
        chosen = select(keys, cands, self.cost_model, n_measure, n_explore,
                        first=self._first,
                        rng=np.random.default_rng([self.seed, self.measured, 1]))
        if not chosen:
            self.exhausted = True  # neither the sampler nor the fallback found a new point
        self.pool.drop([k for k in keys if k not in chosen])
        out = []
        for k in chosen:
            self.pool.ensure_trial(k)
            entry = self.pool.pending[k]
            program = entry.candidate.program if entry.candidate is not None else None
            out.append(MeasureInput(self.workload, Schedule.of(self.space, entry.point),
                                    self.hw, program))
        return out

    def record(self, measurements: list[Measurement]) -> None:
        """Commit each measurement, then tell the study, then refit the cost model."""
        check(len(measurements) == len(self.pool.pending),
              f"record() got {len(measurements)} measurements for {len(self.pool.pending)} "
              "proposed schedules")
        for m in measurements:
            entry = self.pool.pending.pop(m.schedule.key)
            self.db.commit(m)
            self._note(m)
            for t in entry.trials:
                if m.ok:
                    self.study.tell(t, self._values(m))
                else:
                    t.set_user_attr("error", m.error)
                    self.study.tell(t, state=TrialState.FAIL)
            if entry.candidate is not None:
                self.training.add(entry.candidate, m.latency_ns)
        if self.cost_model is not None and measurements:
            self.training.refit(self.cost_model)

    def step(self, n_measure: int, n_explore: int = 2) -> list[Measurement]:
        """Propose, measure in one runner batch, record; returns the new measurements."""
        inputs = self.propose(n_measure, n_explore)
        if not inputs:
            return []
        ms = self.runner.run(inputs)
        self.record(ms)
        return ms
