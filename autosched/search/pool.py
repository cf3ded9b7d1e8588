"""One round's candidates: sampler proposals sorted into invalid, duplicate and pending.

A :class:`CandidatePool` belongs to one tuner. Each asked trial is checked against the
space's constraints (and, when a cost model needs the program, the code generator) and
is either told at once (``skip`` user attribute: ``invalid`` or ``duplicate``) or kept
pending until the tuner measures or drops it. A constrained sampler
(:func:`~autosched.search.study.learns_validity`) is told an invalid point as ``COMPLETE``
with its number of violated constraints as the trial constraint ``valid``, so it learns
where the valid points are; others get ``FAIL``, which samplers ignore.

Points may also be pending without a trial (``extra``: a neighbourhood move, a random
valid point, or a candidate lowered in an earlier round); the study learns a measured
extra as a finished trial (:meth:`CandidatePool.tell_measured`), so it costs the sampler
no ask. Lowered candidates are kept between rounds (:meth:`CandidatePool.lowered`), so
a point is lowered and featurised once per search.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass, field

import numpy as np
import optuna
from optuna.trial import TrialState

from cost_models.base import Candidate
from search_spaces import Schedule, Space, Workload
from sim.errors import AutoschedError
from sim.hardware import Hardware

from ..families import build
from .study import CONSTRAINT, learns_validity

__all__ = ["CandidatePool", "Pending"]

CACHE_LIMIT = 20_000  # lowered candidates kept between rounds (a space's valid points fit)
ENUM_LIMIT = 200_000  # spaces up to this size are enumerated for random unmeasured points
_VALID: dict[str, dict[str, dict]] = {}  # valid points by key, per space digest (read-only)


@dataclass
class Pending:
    """A point waiting for measurement, the trials that asked it and its lowered candidate."""

    point: dict
    trials: list[optuna.trial.Trial] = field(default_factory=list)
    candidate: Candidate | None = None


class CandidatePool:
    """Sorts proposals for one (workload, space, hardware) study; see the module docstring."""

    def __init__(self, study: optuna.Study, workload: Workload, space: Space, hw: Hardware,
                 *, n_objectives: int) -> None:
        self.study, self.workload, self.space, self.hw = study, workload, space, hw
        self.n_objectives = n_objectives
        self.constrained = learns_validity(study.sampler)
        self.pending: dict[str, Pending] = {}
        self.invalid: dict[str, int] = {}  # key -> number of violated constraints
        self._built: dict[str, Candidate | None] = {}
        self._points: dict[str, dict] = {}  # lowered valid points by key
        self._valid: dict[str, dict] | None = None

    def key(self, point: dict) -> str:
        return Schedule.key_of(self.space, point)

    def candidate(self, point: dict) -> Candidate | None:
        """The lowered candidate of a point, or None if the code generator rejects it (cached)."""
        key = self.key(point)
        if key not in self._built:
            try:
                program = build(self.workload, point, self.hw).program
                cand = Candidate(self.workload, self.space, tuple(sorted(point.items())),
                                 self.hw, program)
            except AutoschedError:
                cand = None
            if len(self._built) >= CACHE_LIMIT:
                self._built.clear()
                self._points.clear()
            self._built[key] = cand
            if cand is not None:
                self._points[key] = point
        return self._built[key]

    def lowered(self, measured: Collection[str]) -> list[dict]:
        """Points lowered (and valid) in earlier rounds, neither measured nor pending."""
        return [p for k, p in self._points.items() if k not in measured and k not in self.pending]

    def store(self, key: str) -> Candidate | None:
        """The lowered candidate of a pending or earlier lowered point (None if unknown or
        invalid)."""
        if key in self.pending and self.pending[key].candidate is not None:
            return self.pending[key].candidate
        return self._built.get(key)

    def lowered_keys(self) -> set[str]:
        """Keys of every point lowered so far, valid or not."""
        return set(self._built)

    @property
    def n_lowered(self) -> int:
        """Points lowered so far (valid or not): the search's own lowering work."""
        return len(self._built)

    def valid_points(self) -> dict[str, dict] | None:
        """Every valid point by key for spaces of at most ``ENUM_LIMIT`` points (enumerated
        once), else None."""
        if self._valid is None and self.space.size() <= ENUM_LIMIT:
            d = self.space.digest
            if d not in _VALID:
                if len(_VALID) >= 64:
                    _VALID.clear()
                _VALID[d] = {self.key(p): p for p in self.space.enumerate()}
            self._valid = _VALID[d]
        return self._valid

    def unmeasured(self, rng: np.random.Generator, n: int, measured: Collection[str]
                   ) -> list[dict]:
        """Up to ``n`` random valid points neither ``measured`` nor pending nor known invalid.

        Spaces of at most ``ENUM_LIMIT`` points are enumerated once (valid points by key);
        larger ones are sampled with rejection, and give nothing when constraints reject
        nearly every draw.
        """
        if n < 1:
            return []
        self.valid_points()
        taken = set(measured) | self.pending.keys() | self.invalid.keys()
        if self._valid is None:
            try:
                drawn = self.space.sample(rng, n)
            except AutoschedError:
                return []
            return [p for p in drawn if self.key(p) not in taken]
        free = [k for k in self._valid if k not in taken]
        return [self._valid[free[i]] for i in rng.permutation(len(free))[:n]]

    def skip(self, trial: optuna.trial.Trial, why: str) -> None:
        """Tell ``trial`` as not measured (``FAIL`` with user attribute ``skip=why``)."""
        trial.set_user_attr("skip", why)
        self.study.tell(trial, state=TrialState.FAIL)

    def _tell_invalid(self, trial: optuna.trial.Trial, violations: int) -> None:
        if not self.constrained:
            self.skip(trial, "invalid")
            return
        trial.set_user_attr("skip", "invalid")
        trial.set_constraint(CONSTRAINT, float(max(violations, 1)))
        self.study.tell(trial, [math.inf] * self.n_objectives)

    def _check(self, key: str, point: dict, build_it: bool) -> tuple[bool, Candidate | None]:
        """(valid, candidate); remembers invalid keys with their violation count."""
        if key in self.invalid:
            return False, None
        if key in self._built:  # lowered before: validated then
            return self._built[key] is not None, self._built[key]
        if reasons := self.space.validate(point):
            self.invalid[key] = len(reasons)
            return False, None
        if not build_it:
            return True, None
        cand = self.candidate(point)
        if cand is None:
            self.invalid[key] = 1
        return cand is not None, cand

    def prepare(self, point: dict) -> bool:
        """Validate and lower ``point`` into the pool's store without making it pending
        (cached); False if it is invalid."""
        return self._check(self.key(point), point, True)[0]

    def consider(self, trial: optuna.trial.Trial, point: dict, taken: set[str] | dict,
                 *, build_it: bool) -> None:
        """Sort one asked trial; ``taken`` holds the keys already measured."""
        key = self.key(point)
        if key in taken:
            self.skip(trial, "duplicate")
            return
        if key in self.pending:
            if self.pending[key].trials:
                self.skip(trial, "duplicate")
            else:
                self.pending[key].trials.append(trial)  # an extra the sampler also asked
            return
        ok, cand = self._check(key, point, build_it)
        if not ok:
            self._tell_invalid(trial, self.invalid[key])
        else:
            self.pending[key] = Pending(point, [trial], cand)

    def add_extra(self, point: dict, taken: Collection[str], *, build_it: bool) -> bool:
        """Add a point without a trial unless ``taken`` (the keys already measured) holds
        it; False if it is measured, invalid or already pending."""
        key = self.key(point)
        if key in self.pending or key in taken:
            return False
        ok, cand = self._check(key, point, build_it)
        if ok:
            self.pending[key] = Pending(point, [], cand)
        return ok

    def tell_measured(self, point: dict, values: list[float] | None, error: str = "") -> None:
        """Add a measured point that has no trial to the study as a finished trial
        (``values`` None: a failed measurement), without asking the sampler."""
        self.study.add_trial(optuna.trial.create_trial(
            params=point, distributions=self.space.distributions(point), values=values,
            state=TrialState.COMPLETE if values is not None else TrialState.FAIL,
            user_attrs={"error": error} if values is None else {}))

    def drop(self, keys: list[str]) -> None:
        """Remove pending points that will not be measured, telling their trials why."""
        for key in keys:
            for t in self.pending.pop(key).trials:
                self.skip(t, "unselected")
