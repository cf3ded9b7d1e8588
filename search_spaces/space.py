"""The schedule space: parameters, conditions and constraints, and the one engine over them.

A point is a plain dict ``{param name: value}`` holding exactly the active parameters. A
parameter is active when it has no condition, or when its condition's parameter is active
and takes one of the listed values (conditions chain; a condition may only name a parameter
declared earlier). A constraint applies when its own ``when`` holds and every parameter it
reads is active. A point is valid when it names only active parameters, every active one
is present and inside its domain, and every applicable constraint holds.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from search_spaces import encoding, walk
from search_spaces.constraints import Constraint, Rule
from search_spaces.domains import Categorical, Domain, norm
from search_spaces.errors import ScheduleError, SpaceError
from search_spaces.params import Cond, Param, check_name, is_met

__all__ = ["Space"]

Point = dict[str, Any]


def _describe(d: Domain) -> str:
    vals = d.values()
    shown = ", ".join(repr(v) for v in vals[:8]) + (", ..." if len(vals) > 8 else "")
    return f"Categorical {{{shown}}}" if isinstance(d, Categorical) else f"{d} = {{{shown}}}"


@dataclass(frozen=True)
class Space:
    """A named, versioned space; bump ``version`` whenever the meaning of a point changes.
    ``macs``: the multiply-accumulates its workload's arithmetic needs, whatever the point
    (0 for families without them), which the cost model compares with the work a point's
    program issues."""

    name: str
    version: int
    params: tuple[Param, ...]
    constraints: tuple[Constraint | Rule, ...] = ()
    macs: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "params", tuple(self.params))
        object.__setattr__(self, "constraints", tuple(self.constraints))
        check_name(self.name, "space")
        if type(self.version) is not int or self.version < 0:
            raise SpaceError(f"space {self.name}: version must be an int >= 0, "
                             f"got {self.version!r}")
        seen: dict[str, Param] = {}
        for p in self.params:
            if p.name in seen:
                raise SpaceError(f"space {self.name}: parameter {p.name!r} declared twice")
            if p.when is not None:
                self._check_cond(p.when, seen, f"parameter {p.name!r}")
            seen[p.name] = p
        names = [c.name for c in self.constraints]
        if len(set(names)) != len(names):
            raise SpaceError(f"space {self.name}: constraint names must be unique: {names}")
        for c in self.constraints:
            for v in sorted(c.vars()):
                d = seen[v].domain if v in seen else None
                if d is not None and isinstance(c, Rule):
                    continue  # a rule's function reads any parameter, strings included
                if d is None or (isinstance(d, Categorical) and str in map(type, d.values())):
                    raise SpaceError(f"space {self.name}: constraint {c.name!r} reads {v!r}, "
                                     "which is not a numeric parameter of the space")
            if c.when is not None:
                self._check_cond(c.when, seen, f"constraint {c.name!r}")

    def _check_cond(self, cond: Cond, seen: dict[str, Param], owner: str) -> None:
        if cond.param not in seen:
            raise SpaceError(f"space {self.name}: {owner} is conditioned on {cond.param!r}, "
                             "which must be a parameter declared before it")
        dom = seen[cond.param].domain
        for v in cond.values:
            if not dom.contains(v):
                raise SpaceError(f"space {self.name}: {owner} waits for {cond.param}={v!r}, "
                                 f"which is outside {_describe(dom)}")

    # ----------------------------------------------------------------- structure
    @cached_property
    def _by_name(self) -> dict[str, Param]:
        return {p.name: p for p in self.params}

    def param(self, name: str) -> Param:
        """The parameter called ``name``."""
        if name not in self._by_name:
            raise SpaceError(f"space {self.name} has no parameter {name!r}")
        return self._by_name[name]

    def to_dict(self) -> dict:
        """Structural description: everything the digest covers."""
        return {"name": self.name, "version": self.version,
                "params": [p.to_dict() for p in self.params],
                "constraints": [c.to_dict() for c in self.constraints]}

    @cached_property
    def digest(self) -> str:
        """Stable 16-hex hash of the structure and version, for database keys."""
        blob = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    # ----------------------------------------------------------------- validity
    def active(self, point: Point) -> tuple[str, ...]:
        """Names of the parameters that exist for ``point``, in declaration order."""
        on: set[str] = set()
        for p in self.params:
            if is_met(p.when, point, on):
                on.add(p.name)
        return tuple(p.name for p in self.params if p.name in on)

    def _shape_reasons(self, point: Point) -> tuple[list[str], set[str]]:
        """Reasons that are not constraints, and the parameters whose value is unusable."""
        if not isinstance(point, dict):
            return [f"a point must be a dict, got {type(point).__name__}"], set()
        reasons = [f"unknown parameter {k!r} (space {self.name} has "
                   f"{', '.join(p.name for p in self.params)})"
                   for k in sorted(set(point) - set(self._by_name), key=str)]
        on, bad = set(self.active(point)), set()
        for p in self.params:
            if p.name in on and p.name not in point:
                reasons.append(f"missing parameter {p.name} in {_describe(p.domain)}")
                bad.add(p.name)
            elif p.name in on and not p.domain.contains(point[p.name]):
                reasons.append(f"{p.name}={point[p.name]!r} is outside {_describe(p.domain)}")
                bad.add(p.name)
            elif p.name in point and p.name not in on:
                reasons.append(f"{p.name} is given but inactive: it exists only when {p.when}")
        return reasons, bad

    def validate(self, point: Point, *, constraints: bool = True) -> list[str]:
        """Every reason ``point`` is invalid (empty list: valid).

        ``constraints=False`` checks only names, presence, activity and domains.
        """
        reasons, bad = self._shape_reasons(point)
        if not constraints or not isinstance(point, dict):
            return reasons
        on = set(self.active(point)) - bad
        for c in self.constraints:
            if c.applies(point, on) and (msg := c.violation(point)) is not None:
                reasons.append(msg)
        return reasons

    def check(self, point: Point) -> None:
        """Raise :class:`ScheduleError` listing every reason ``point`` is invalid."""
        reasons = self.validate(point)
        if reasons:
            raise ScheduleError(f"invalid point for space {self.name} v{self.version}: "
                                + "; ".join(reasons))

    # ----------------------------------------------------------------- walking
    def size(self) -> int:
        """Exact number of points allowed by domains and conditions (constraints ignored)."""
        return walk.count(self)

    def enumerate(self, limit: int | None = None) -> Iterator[Point]:
        """Every valid point, in declaration order then domain order (deterministic).

        Raises :class:`SpaceError` at once when ``size()`` exceeds ``limit``.
        """
        if limit is not None and (n := self.size()) > limit:
            raise SpaceError(f"space {self.name} has up to {n} points, more than limit={limit}; "
                             "use sample() or raise the limit")
        return walk.walk(self)

    def fill(self, choose: Callable[[Param], Any]) -> Point:
        """A point built by calling ``choose(param)`` for each active parameter, in order.

        Conditions see the values chosen so far; constraints are not checked.
        """
        point: Point = {}
        on: set[str] = set()
        for p in self.params:
            if is_met(p.when, point, on):
                point[p.name] = norm(choose(p))
                on.add(p.name)
        return point

    def sample(self, rng: np.random.Generator, n: int, max_draws: int | None = None) -> list[Point]:
        """``n`` valid points, each parameter uniform over its domain, invalid draws rejected.

        Deterministic for a seeded ``rng``; duplicates are possible. Raises
        :class:`SpaceError` if ``max_draws`` (default ``max(1000, 100 * n)``) draws yield
        fewer than ``n`` valid points.
        """
        cap = max(1000, 100 * n) if max_draws is None else max_draws
        out: list[Point] = []
        draws = 0
        while len(out) < n and draws < cap:
            draws += 1
            point = self.fill(lambda p: p.domain.values()[int(rng.integers(len(p.domain)))])
            if not self.validate(point):
                out.append(point)
        if len(out) < n:
            raise SpaceError(f"space {self.name}: only {len(out)} of {n} points valid after "
                             f"{cap} draws; its constraints reject most points, use enumerate()")
        return out

    # ----------------------------------------------------------------- encodings
    def features(self, point: Point) -> np.ndarray:
        """Fixed-length float vector of ``point``; see :func:`encoding.features`."""
        return encoding.features(self, point)

    def feature_names(self) -> tuple[str, ...]:
        """One name per slot of :meth:`features`."""
        return encoding.feature_names(self)
