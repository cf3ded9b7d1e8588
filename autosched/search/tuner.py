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

from ..database import Database, open_database
from ..families import family_of
from ..measure import MeasureInput, Runner
from .moves import around
from .pool import CandidatePool
from .ranking import select
from .study import SearchError, make_sampler, make_study
from .surrogate import SpaceSurrogate
from .training import TrainingSet

__all__ = ["TaskTuner"]

ASK_FACTOR = 4  # sampler asks per measurement slot without a model (an ask costs O(trials))
MAX_ASKS = 256  # upper bound on asks per round
RANKED_ASKS = 2  # sampler asks per round beside the model's own moves when a model ranks
RANDOM_FIRST = 6  # random unmeasured points per slot in a round with nothing measured yet
N_SECOND, N_TWO = 4, 8  # moves from the 2nd and 3rd best points; two-change moves per round
SURROGATE_FACTOR = 2  # points per slot lowered because the space surrogate likes them
OUTLOOK_PICKS = 8  # the surrogate's favourites an outlook lowers beside the moves
OUTLOOK_RANDOM = 8  # random valid points an outlook lowers, so its surrogate sees the space
PRIOR_NOISE = 0.05  # the model's log2 error assumed before it has predicted any measurement
NOISE_FLOOR = 0.01  # never trust a predicted gain below 0.7 %


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
        self.lowering = family_of(workload)
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
        self._predicted: dict[str, float] = {}  # score of each proposed point, by key
        self.errors: list[float] = []  # model log2 error on each measured ranked point
        self._outlook: tuple[tuple, tuple[float, float] | None] | None = None
        self._surrogate: SpaceSurrogate | None = None
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
                self.pool.tell_measured(point, self._values(m) if m.ok else None, m.error)
            if self.cost_model is not None and (cand := self.pool.candidate(point)) is not None:
                self.training.add(cand, m.latency_ns)

    # ----------------------------------------------------------------- one round
    def propose(self, n_measure: int, n_explore: int = 2) -> list[MeasureInput]:
        """Up to ``n_measure`` distinct unmeasured valid schedules to measure next.

        Without a cost model: the first valid ones the sampler asks (topped up with random
        valid points when it keeps repeating itself). With one, the model ranks a pool
        lowered once per point and kept between rounds: ``RANKED_ASKS`` sampler asks, the
        neighbourhood moves around the three best measured points (:mod:`.moves`), random
        unmeasured valid points (``RANDOM_FIRST`` per slot while nothing is measured, one
        per slot after), every candidate lowered in earlier rounds, and on enumerable
        spaces ``SURROGATE_FACTOR`` per slot of the unlowered points a
        :class:`SpaceSurrogate` of the model's scores likes best; its top
        ``n_measure - n_explore`` plus ``n_explore`` random others are kept. The enqueued
        named points (default, library kernel) are always kept. An empty list means the
        space is exhausted. Call :meth:`record` with the results.
        """
        if n_measure < 1 or n_explore < 0:
            raise SearchError(f"need n_measure >= 1 and n_explore >= 0, got {n_measure}, "
                              f"{n_explore}")
        check(not self.pool.pending, "record() the previous proposal before proposing again")
        if self.exhausted:
            return []
        ranked = self.cost_model is not None
        rng = np.random.default_rng([self.seed, self.measured, 2])
        default_due = bool(self._first) and self._first[0] not in self._by_key
        if ranked and default_due and n_measure == 1:  # a warm-up: the default alone
            trial = self.study.ask()
            self.pool.consider(trial, self.space.suggest(trial), self._by_key, build_it=True)
        if ranked and not self.pool.pending:
            self._gather(n_measure, rng)
        else:
            for _ in range(min(ASK_FACTOR * n_measure + 32, MAX_ASKS)):
                if len(self.pool.pending) >= n_measure:
                    break
                trial = self.study.ask()
                self.pool.consider(trial, self.space.suggest(trial), self._by_key,
                                   build_it=False)
            for p in self.pool.unmeasured(rng, n_measure - len(self.pool.pending),
                                          self._by_key):
                self.pool.add_extra(p, self._by_key, build_it=False)
        keys = list(self.pool.pending)
        cands = [self.pool.pending[k].candidate for k in keys]
        chosen, scores = select(keys, cands, self.cost_model, n_measure, n_explore,
                                first=self._first,
                                rng=np.random.default_rng([self.seed, self.measured, 1]))
        self._predicted.update(scores)
        if not chosen:
            self.exhausted = True  # neither the sampler nor the fallback found a new point
        self.pool.drop([k for k in keys if k not in chosen])
        out = []
        for k in chosen:
            entry = self.pool.pending[k]
            program = entry.candidate.program if entry.candidate is not None else None
            out.append(MeasureInput(self.workload, Schedule.of(self.space, entry.point),
                                    self.hw, program))
        return out

    def _gather(self, n_measure: int, rng: np.random.Generator) -> None:
        """Fill the pool with lowered candidates for the model to rank (see :meth:`propose`)."""
        default_due = bool(self._first) and self._first[0] not in self._by_key
        for _ in range(RANKED_ASKS + default_due):
            trial = self.study.ask()
            self.pool.consider(trial, self.space.suggest(trial), self._by_key, build_it=True)
        for p in self._moves(rng):
            self.pool.add_extra(p, self._by_key, build_it=True)
        n_random = (RANDOM_FIRST if not self.measurements else 1) * n_measure
        for p in self.pool.unmeasured(rng, n_random, self._by_key):
            self.pool.add_extra(p, self._by_key, build_it=True)
        for p in self.pool.lowered(self._by_key):
            self.pool.add_extra(p, self._by_key, build_it=True)
        for p in self._surrogate_picks(SURROGATE_FACTOR * n_measure):
            self.pool.add_extra(p, self._by_key, build_it=True)

    def _surrogate_picks(self, n: int, keys: list[str] | None = None) -> list[dict]:
        """The ``n`` unlowered valid points that a :class:`SpaceSurrogate` of the cost
        model's scores of ``keys`` (lowered points; default: the pending ones) likes best,
        on enumerable spaces only."""
        valid = self.pool.valid_points()
        if valid is None:
            return []
        if self._surrogate is None:
            self._surrogate = SpaceSurrogate(self.space, valid, seed=self.seed)
        keys = list(self.pool.pending) if keys is None else keys
        cands = [self.pool.store(k) for k in keys]
        scores = np.asarray(self.cost_model.predict(cands), dtype=float)
        if not self._surrogate.fit(keys, scores):
            return []
        lowered = self.pool.lowered_keys()
        skip = set(self._by_key) | set(self.pool.pending) | lowered | set(self.pool.invalid)
        return [valid[k] for k in self._surrogate.best(n, skip)]

    def _moves(self, rng: np.random.Generator) -> list[dict]:
        """Neighbourhood moves around the three fastest measured points."""
        ok = sorted((m for m in self.measurements if m.ok), key=lambda m: m.latency_ns)
        best = [m.schedule.point for m in ok[:3]
                if not self.space.validate(m.schedule.point, constraints=False)]
        return around(self.space, best, rng, n_second=N_SECOND, n_two=N_TWO)

    # ----------------------------------------------------------------- outlook
    @property
    def noise(self) -> float:
        """The model's recent log2 error on this task's measured points (RMS of the last 16
        predictions made before measuring), at least ``NOISE_FLOOR``; ``PRIOR_NOISE``
        before two such predictions exist."""
        if len(self.errors) < 2:
            return PRIOR_NOISE
        e = np.asarray(self.errors[-16:])
        return max(float(np.sqrt(np.mean(e * e))), NOISE_FLOOR)

    def outlook(self) -> tuple[float, float] | None:
        """(predicted best latency of an unmeasured candidate in ns, model noise in log2),
        or None without a model that predicts latencies or without any lowered candidate.

        Ranks every candidate lowered so far, the neighbourhood moves around the best
        points, ``OUTLOOK_RANDOM`` random valid points and, on enumerable spaces, the
        ``OUTLOOK_PICKS`` points a surrogate of the model's scores likes best (all lowered
        now, once). The points are gathered again only when the task's own measurements
        changed; a refit of the model (another task's round) only re-predicts them.
        """
        model = self.cost_model
        if model is None or self.exhausted or model.latency_ns(np.zeros(1)) is None:
            return None
        state = (self.measured, self.training.fits)
        if self._outlook is not None and self._outlook[0] == state:
            return self._outlook[1]
        if self._outlook is None or self._outlook[0][0] != self.measured:
            rng = np.random.default_rng([self.seed, self.measured, 3])
            for p in self._moves(rng):
                self.pool.prepare(p)
            for p in self.pool.unmeasured(rng, OUTLOOK_RANDOM, self._by_key):
                self.pool.prepare(p)
            keys = [self.pool.key(p) for p in self.pool.lowered(self._by_key)]
            for p in self._surrogate_picks(OUTLOOK_PICKS, keys):
                self.pool.prepare(p)
        cands = [self.pool.candidate(p) for p in self.pool.lowered(self._by_key)]
        cands = [c for c in cands if c is not None]
        out = None
        if cands:
            pred = model.latency_ns(np.asarray(model.predict(cands), dtype=float))
            out = (float(np.min(pred)), self.noise)
        self._outlook = (state, out)
        return out

    def record(self, measurements: list[Measurement], *, refit: bool = True) -> None:
        """Commit each measurement, then tell the study, then (``refit``) refit the cost
        model; a scheduler recording several tasks at once refits the shared model once."""
        check(len(measurements) == len(self.pool.pending),
              f"record() got {len(measurements)} measurements for {len(self.pool.pending)} "
              "proposed schedules")
        for m in measurements:
            entry = self.pool.pending.pop(m.schedule.key)
            self.db.commit(m)
            self._note(m)
            if not entry.trials:  # a move or an extra: the study learns it without an ask
                self.pool.tell_measured(entry.point, self._values(m) if m.ok else None,
                                        m.error)
            for t in entry.trials:
                if m.ok:
                    self.study.tell(t, self._values(m))
                else:
                    t.set_user_attr("error", m.error)
                    self.study.tell(t, state=TrialState.FAIL)
            predicted = self._predicted.pop(m.schedule.key, None)
            if predicted is not None and m.ok and self.cost_model is not None:
                ns = self.cost_model.latency_ns(np.asarray([predicted]))
                if ns is not None and ns[0] > 0:
                    self.errors.append(float(np.log2(ns[0] / m.latency_ns)))
            if entry.candidate is not None:
                self.training.add(entry.candidate, m.latency_ns)
        self._predicted.clear()
        if refit and self.cost_model is not None and measurements:
            self.training.refit(self.cost_model)

    def step(self, n_measure: int, n_explore: int = 2) -> list[Measurement]:
        """Propose, measure in one runner batch, record; returns the new measurements."""
        inputs = self.propose(n_measure, n_explore)
        if not inputs:
            return []
        ms = self.runner.run(inputs)
        self.record(ms)
        return ms
