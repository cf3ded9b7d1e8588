"""The Optuna strategy: a sampler driven through ask/tell, beside the model's own moves.

Every asked trial's point is checked by the task's pool. Trials that Optuna asked but
that were not measured carry the user attribute ``skip`` naming why (``invalid``:
outside the space's constraints or rejected by the code generator; ``duplicate``:
already measured or already asked this round; ``unselected``: ranked out by the cost
model). They are told ``FAIL``, which samplers ignore, except invalid points asked by a
constrained sampler (:func:`.study.learns_validity`): those are told ``COMPLETE`` with an
infinite latency and their number of violated constraints as the trial constraint
``valid``, so TPE learns the valid region instead of wasting most of its asks outside it.
A measured failure is told ``FAIL`` with the user attribute ``error``. A measured point
the sampler did not ask (a move, a random point, an earlier run's) joins the study as a
finished trial, so it costs the sampler no ask.

Without a cost model a round is the sampler's first valid asks (topped up with random
valid points when it keeps repeating itself). With one, the model ranks a pool lowered
once per point and kept between rounds: ``ranked_asks`` sampler asks, the neighbourhood
moves around the three best measured points (:mod:`.moves`), random unmeasured valid
points (``random_first`` per slot while nothing is measured, one per slot after), every
candidate lowered in earlier rounds, and on enumerable spaces ``surrogate_factor`` per
slot of the unlowered points a space surrogate of the model's scores likes best.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
from optuna.samplers import BaseSampler
from optuna.trial import Trial, TrialState

from autosched.measure.record import Measurement
from sim import SIM_VERSION

from ..defaults import SAMPLERS
from .errors import SearchError
from .optuna_adapter import finished_trial, schedule_of, suggest
from .strategy import SearchStrategy, check_unbound
from .study import CONSTRAINT, learns_validity, make_sampler, make_study

if TYPE_CHECKING:
    from .tuner import TaskTuner

__all__ = ["OptunaSearch"]


class OptunaSearch(SearchStrategy):
    """Proposes with the Optuna sampler ``sampler`` (a name in ``SAMPLERS``, seeded with the
    task's seed, or an instance, shared as given); see the module docstring."""

    def __init__(self, sampler: str | BaseSampler = "tpe") -> None:
        if not isinstance(sampler, BaseSampler) and sampler not in SAMPLERS:
            raise SearchError(f"unknown sampler {sampler!r}; choose one of "
                              f"{', '.join(SAMPLERS)} or pass an optuna sampler instance")
        self.sampler = sampler
        self.name = sampler if isinstance(sampler, str) else type(sampler).__name__
        self.task: TaskTuner | None = None
        self._trials: dict[str, list[Trial]] = {}  # this round's asked trials, by key
        self._round: dict[str, dict] = {}  # this round's pending points, by key

    def clone(self) -> OptunaSearch:
        return OptunaSearch(self.sampler)

    # ----------------------------------------------------------------- the study
    def bind(self, task: TaskTuner) -> None:
        check_unbound(self)
        self.task = task
        w, hw, space = task.workload, task.hw, task.space
        storage = task.ctx.storage
        name = (f"{w.key}@{hw.fingerprint}/{space.name}v{space.version}"
                f"/sim{SIM_VERSION}/{'multi' if task.multi_objective else 'latency'}")
        self.study = make_study(make_sampler(self.sampler, task.seed,
                                             multi_objective=task.multi_objective),
                                multi_objective=task.multi_objective, storage=storage,
                                study_name=name if storage else None)
        self.constrained = learns_validity(self.study.sampler)
        self.observe([m for m in task.measurements if task.expressible(m)])
        for point in task.named_due:
            self.study.enqueue_trial(point)

    def observe(self, measurements: Sequence[Measurement]) -> None:
        """Add each measurement the study lacks as a finished trial."""
        if not measurements:
            return
        space = self.task.space
        known = {schedule_of(space, t).key
                 for t in self.study.get_trials(deepcopy=False,
                                                states=(TrialState.COMPLETE, TrialState.FAIL))
                 if not t.user_attrs.get("skip")}
        for m in measurements:
            if m.schedule.key not in known:
                self._tell_measured(m.schedule.point, m)

    def _tell_measured(self, point: dict, m: Measurement) -> None:
        values = self.task.values(m) if m.ok else None
        self.study.add_trial(finished_trial(self.task.space, point, values,
                                            {"error": m.error} if values is None else {}))

    def _skip(self, trial: Trial, why: str) -> None:
        trial.set_user_attr("skip", why)
        self.study.tell(trial, state=TrialState.FAIL)

    def _tell_invalid(self, trial: Trial, violations: int) -> None:
        if not self.constrained:
            self._skip(trial, "invalid")
            return
        trial.set_user_attr("skip", "invalid")
        trial.set_constraint(CONSTRAINT, float(max(violations, 1)))
        n = 2 if self.task.multi_objective else 1
        self.study.tell(trial, [math.inf] * n)

    def _ask(self, build_it: bool) -> None:
        """Ask one trial and sort its point: told at once (``skip``) or made pending."""
        task, pool = self.task, self.task.pool
        trial = self.study.ask()
        point = suggest(task.space, trial)
        key = pool.key(point)
        if key in task.measured_keys:
            self._skip(trial, "duplicate")
            return
        if key in pool.pending:
            if self._trials.get(key):
                self._skip(trial, "duplicate")
            else:
                self._trials[key] = [trial]  # an extra the sampler also asked
            return
        ok, cand = pool.check(key, point, build_it)
        if not ok:
            self._tell_invalid(trial, pool.invalid[key])
        else:
            pool.hold(key, point, cand)
            self._trials[key] = [trial]

    # ----------------------------------------------------------------- one round
    def propose(self, n_measure: int) -> list[dict]:
        task, pool, s = self.task, self.task.pool, self.task.settings
        ranked = task.cost_model is not None
        rng = task.rng(2)
        default_due = task.default_due
        if ranked and default_due and n_measure == 1:  # a warm-up: the default alone
            self._ask(build_it=True)
        if ranked and not pool.pending:
            self._gather(n_measure, rng, default_due)
        else:
            for _ in range(min(s.ask_factor * n_measure + 32, s.max_asks)):
                if len(pool.pending) >= n_measure:
                    break
                self._ask(build_it=False)
            for p in pool.unmeasured(rng, n_measure - len(pool.pending), task.measured_keys):
                pool.add(p, task.measured_keys, build_it=False)
        self._round = {k: e.point for k, e in pool.pending.items()}
        return list(self._round.values())

    def _gather(self, n_measure: int, rng: np.random.Generator, default_due: bool) -> None:
        """Fill the pool with lowered candidates for the model to rank (module docstring)."""
        task, pool, s = self.task, self.task.pool, self.task.settings
        taken = task.measured_keys
        for _ in range(s.ranked_asks + default_due):
            self._ask(build_it=True)
        for p in task.moves(rng):
            pool.add(p, taken, build_it=True)
        n_random = (s.random_first if not task.measurements else 1) * n_measure
        for p in pool.unmeasured(rng, n_random, taken):
            pool.add(p, taken, build_it=True)
        for p in pool.lowered(taken):
            pool.add(p, taken, build_it=True)
        for p in task.surrogate_picks(s.surrogate_factor * n_measure):
            pool.add(p, taken, build_it=True)

    def update(self, measurements: Sequence[Measurement]) -> None:
        """Tell each measured point's trials (or add it as a finished trial when the sampler
        did not ask it), then the round's unmeasured trials as ``unselected``."""
        for m in measurements:
            trials = self._trials.pop(m.schedule.key, [])
            if not trials:  # a move or an extra: the study learns it without an ask
                self._tell_measured(self._round.get(m.schedule.key, m.schedule.point), m)
            for t in trials:
                if m.ok:
                    self.study.tell(t, self.task.values(m))
                else:
                    t.set_user_attr("error", m.error)
                    self.study.tell(t, state=TrialState.FAIL)
        for trials in self._trials.values():
            for t in trials:
                self._skip(t, "unselected")
        self._trials.clear()
        self._round.clear()

