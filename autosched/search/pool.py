"""One task's candidates: validity, lowering once, and the points pending measurement.

A :class:`CandidatePool` belongs to one tuner and knows no search library. A strategy
checks each point it proposes (:meth:`CandidatePool.check`: the space's constraints and,
when a cost model needs the program, the code generator) and makes the valid, unmeasured
ones pending (:meth:`CandidatePool.hold`, :meth:`CandidatePool.add`); the tuner ranks
the pending points, drops those it will not measure and records the rest. Invalid keys
are remembered with their number of violated constraints, so a strategy that learns
validity can be told how invalid a point was.

Lowered candidates are kept between rounds (:meth:`CandidatePool.lowered`), so a point
is lowered and featurised once per search.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

import numpy as np

from cost_models.base import Candidate
from search_spaces import Schedule, Space, Workload
from sim.errors import AutoschedError
from sim.hardware import Hardware

from ..families import build
from .settings import SearchSettings

__all__ = ["CandidatePool", "Pending"]

_VALID: dict[str, dict[str, dict]] = {}  # valid points by key, per space digest (read-only)


@dataclass
class Pending:
    """A point waiting for measurement and its lowered candidate (None: not lowered)."""

    point: dict
    candidate: Candidate | None = None


class CandidatePool:
    """Candidates of one (workload, space, hardware); see the module docstring."""

    def __init__(self, workload: Workload, space: Space, hw: Hardware, *,
                 settings: SearchSettings) -> None:
        self.workload, self.space, self.hw = workload, space, hw
        self.cache_limit, self.enum_limit = settings.cache_limit, settings.enum_limit
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
            if len(self._built) >= self.cache_limit:
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
        """Every valid point by key for spaces of at most ``enum_limit`` points (enumerated
        once), else None."""
        if self._valid is None and self.space.size() <= self.enum_limit:
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

        Spaces of at most ``enum_limit`` points are enumerated once (valid points by key);
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

    def check(self, key: str, point: dict, build_it: bool) -> tuple[bool, Candidate | None]:
        """(valid, candidate) of ``point`` (whose key is ``key``); lowers it when
        ``build_it``; remembers invalid keys with their violation count (:attr:`invalid`)."""
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
        return self.check(self.key(point), point, True)[0]

    def hold(self, key: str, point: dict, candidate: Candidate | None) -> None:
        """Make a point already checked valid pending."""
        self.pending[key] = Pending(point, candidate)

    def add(self, point: dict, taken: Collection[str], *, build_it: bool) -> bool:
        """Make ``point`` pending unless ``taken`` (the keys already measured) holds it;
        False if it is measured, invalid or already pending."""
        key = self.key(point)
        if key in self.pending or key in taken:
            return False
        ok, cand = self.check(key, point, build_it)
        if ok:
            self.hold(key, point, cand)
        return ok

    def drop(self, keys: Collection[str]) -> None:
        """Forget pending points that will not be measured."""
        for key in keys:
            self.pending.pop(key)
