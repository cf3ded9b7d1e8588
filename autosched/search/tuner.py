"""Per-task search: Optuna proposes through ask/tell, the cost model ranks, the runner measures.

One :class:`TaskTuner` owns one workload on one hardware. Every measurement is committed
to the database as it lands and told to the study; a new tuner on the same database
resumes where the last one stopped and never measures a schedule twice.

Trials that Optuna asked but that were not measured this round are told ``FAIL`` with the
user attribute ``skip`` naming why (``invalid``: outside the space's constraints or
rejected by the code generator; ``duplicate``: already measured or already picked this
round; ``unselected``: ranked out by the cost model). Samplers ignore failed trials, so a
skipped point neither rewards nor penalises its region; a measured failure is told
``FAIL`` with the user attribute ``error``.
"""

from __future__ import annotations

import math

import numpy as np
import optuna
from optuna.trial import TrialState

from cost_models.base import Candidate, CostModel
from search_spaces import Schedule, Workload
from search_spaces.measurement import Measurement
from sim import SIM_VERSION
from sim.errors import AutoschedError, check
from sim.hardware import Hardware

from ..codegen.lowering import build, lowering_for
from ..database import Database, open_database
from ..measure import MeasureInput, Runner
from .study import SearchError, make_sampler, make_study
from .training import TrainingSet

__all__ = ["TaskTuner"]

ASK_FACTOR = 16  # candidates asked per measurement slot when a cost model ranks them
MAX_ASKS = 512  # upper bound on asks per round
ENUM_LIMIT = 20_000  # spaces up to this size are enumerated to fill a round and detect the end


class TaskTuner:
    """Tunes ``workload`` (occurring ``count`` times per model step) on ``hw``."""

    def __init__(self, workload: Workload, count: int, hw: Hardware, *, db: Database | str,
                 runner: Runner, sampler: str | optuna.samplers.BaseSampler = "tpe",
                 seed: int = 0, cost_model: CostModel | None = None,
                 multi_objective: bool = False, storage: str | None = None,
                 training: TrainingSet | None = None) -> None:
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
        self._invalid: set[str] = set()
        self._pending: dict[str, tuple[dict, list[optuna.trial.Trial], Candidate | None]] = {}
        self._valid: list[dict] | None = None
        self.exhausted = False
        self._resume()
        self.default = Schedule.of(self.space, self.lowering.default(workload, hw))
        if self.default.key not in self._by_key:
            self.study.enqueue_trial(self.default.point)

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
            if self.cost_model is not None and (cand := self._candidate(point)) is not None:
                self.training.add(cand, m.latency_ns)

    # ----------------------------------------------------------------- one round
    def _candidate(self, point: dict) -> Candidate | None:
        """The lowered candidate of a valid point, or None if the code generator rejects it."""
        try:
            program = build(self.workload, point, self.hw).program
        except AutoschedError:
            return None
        return Candidate(self.workload, self.space, tuple(sorted(point.items())), self.hw,
                         program)

    def _skip(self, trial: optuna.trial.Trial, why: str) -> None:
        trial.set_user_attr("skip", why)
        self.study.tell(trial, state=TrialState.FAIL)

    def _consider(self, trial: optuna.trial.Trial, point: dict) -> None:
        key = Schedule.of(self.space, point).key
        if key in self._by_key or key in self._pending:
            self._skip(trial, "duplicate")
        elif key in self._invalid or self.space.validate(point):
            self._invalid.add(key)
            self._skip(trial, "invalid")
        elif self.cost_model is None:
            self._pending[key] = (point, [trial], None)
        elif (cand := self._candidate(point)) is None:
            self._invalid.add(key)
            self._skip(trial, "invalid")
        else:
            self._pending[key] = (point, [trial], cand)

    def _fill(self, want: int) -> None:
        """Top the round up with unmeasured points when the sampler keeps repeating itself."""
        if self._valid is None and self.space.size() <= ENUM_LIMIT:
            self._valid = list(self.space.enumerate())
        rng = np.random.default_rng([self.seed, self.measured, len(self._pending)])
        if self._valid is not None:
            taken = self._by_key.keys() | self._pending.keys() | self._invalid
            pool = [p for p in self._valid if Schedule.of(self.space, p).key not in taken]
            order = rng.permutation(len(pool))[: want - len(self._pending)]
            extra = [pool[i] for i in order]
        else:
            try:
                extra = self.space.sample(rng, want - len(self._pending))
            except AutoschedError:
                extra = []  # constraints reject nearly every draw: keep what the sampler gave
        for p in extra:
            self.study.enqueue_trial(p)
            trial = self.study.ask()
            self._consider(trial, self.space.suggest(trial))

    def propose(self, n_measure: int, n_explore: int = 2) -> list[MeasureInput]:
        """Up to ``n_measure`` distinct unmeasured valid schedules to measure next.

        Without a cost model: the first ones the sampler asks. With one: ``ASK_FACTOR``
        times as many are asked and built, the model's top ``n_measure - n_explore`` plus
        ``n_explore`` random others are kept (the enqueued default is always kept). An
        empty list means the space is exhausted. Call :meth:`record` with the results.
        """
        if n_measure < 1 or n_explore < 0:
            raise SearchError(f"need n_measure >= 1 and n_explore >= 0, got {n_measure}, "
                              f"{n_explore}")
        check(not self._pending, "record() the previous proposal before proposing again")
        if self.exhausted:
            return []
        pool = n_measure if self.cost_model is None else min(ASK_FACTOR * n_measure, MAX_ASKS)
        for _ in range(min(4 * pool + 32, MAX_ASKS)):
            if len(self._pending) >= pool:
                break
            trial = self.study.ask()
            self._consider(trial, self.space.suggest(trial))
        if len(self._pending) < n_measure:
            self._fill(n_measure)
        keys = self._select(n_measure, n_explore)
        if not keys:
            self.exhausted = True  # neither the sampler nor the fallback found a new point
        for key in [k for k in self._pending if k not in keys]:
            for t in self._pending.pop(key)[1]:
                self._skip(t, "unselected")
        return [MeasureInput(self.workload, Schedule.of(self.space, self._pending[k][0]),
                             self.hw) for k in keys]

    def _select(self, n_measure: int, n_explore: int) -> list[str]:
        keys = list(self._pending)
        if self.cost_model is None or len(keys) <= n_measure:
            return keys[:n_measure]
        first = [k for k in keys if k == self.default.key]
        rest = [k for k in keys if k != self.default.key]
        scores = self.cost_model.predict([self._pending[k][2] for k in rest])
        ranked = [rest[i] for i in np.argsort(np.asarray(scores, dtype=float), kind="stable")]
        n_top = max(n_measure - len(first) - n_explore, 0)
        top, others = ranked[:n_top], ranked[n_top:]
        rng = np.random.default_rng([self.seed, self.measured, 1])
        n_rand = min(n_measure - len(first) - len(top), len(others))
        explore = [others[i] for i in sorted(rng.choice(len(others), n_rand, replace=False))]
        return first + top + explore

    def record(self, measurements: list[Measurement]) -> None:
        """Commit each measurement, then tell the study, then refit the cost model."""
        check(len(measurements) == len(self._pending),
              f"record() got {len(measurements)} measurements for {len(self._pending)} "
              "proposed schedules")
        for m in measurements:
            point, trials, cand = self._pending.pop(m.schedule.key)
            self.db.commit(m)
            self._note(m)
            for t in trials:
                if m.ok:
                    self.study.tell(t, self._values(m))
                else:
                    t.set_user_attr("error", m.error)
                    self.study.tell(t, state=TrialState.FAIL)
            if cand is not None:
                self.training.add(cand, m.latency_ns)
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
