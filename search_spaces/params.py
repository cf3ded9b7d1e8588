"""Parameters and the conditions that make a parameter exist only for some points."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from search_spaces.domains import Domain, Value, norm, same
from search_spaces.errors import SpaceError
from sim.errors import AutoschedError

__all__ = ["Cond", "Param", "check_name", "is_met"]

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_GOOD: set[str] = set()  # names already checked (spaces are built per workload)


def check_name(name: Any, what: str, exc: type[AutoschedError] = SpaceError) -> None:
    """Names are identifiers, so they can be used in messages, features and keys."""
    if type(name) is str and name in _GOOD:
        return
    if not isinstance(name, str) or not _NAME.match(name):
        raise exc(f"{what} name {name!r} must be an identifier (letters, digits, _)")
    if len(_GOOD) < 4096:
        _GOOD.add(name)


def is_met(cond: Cond | None, point: dict[str, Any], on: set[str] | frozenset[str]) -> bool:
    """Whether ``cond`` holds for ``point`` given the set ``on`` of active parameters.

    No condition always holds; a condition on an inactive or missing parameter never does.
    """
    return cond is None or (cond.param in on and cond.param in point
                            and cond.holds(point[cond.param]))


@dataclass(frozen=True)
class Cond:
    """Holds when parameter ``param`` is active and takes one of ``values``.

    A single value may be passed instead of a tuple. Conditions chain: ``param`` may itself
    be conditional, and is then active only when its own condition holds.
    """

    param: str
    values: tuple[Value, ...]

    def __post_init__(self) -> None:
        vals = self.values
        vals = tuple(vals) if isinstance(vals, tuple | list) else (vals,)
        object.__setattr__(self, "values", tuple(norm(v) for v in vals))
        check_name(self.param, "condition parameter")
        if not self.values:
            raise SpaceError(f"condition on {self.param!r} needs at least one value")

    def holds(self, value: Any) -> bool:
        """Whether ``value`` (the conditioning parameter's value) is one of ``values``."""
        return any(same(value, v) for v in self.values)

    def __str__(self) -> str:
        if len(self.values) == 1:
            return f"{self.param}={self.values[0]!r}"
        return f"{self.param} in ({', '.join(repr(v) for v in self.values)})"

    def to_dict(self) -> dict:
        return {"param": self.param, "values": list(self.values)}


@dataclass(frozen=True)
class Param:
    """A named decision with its domain; ``when`` makes it exist only under a condition."""

    name: str
    domain: Domain
    when: Cond | None = None

    def __post_init__(self) -> None:
        check_name(self.name, "parameter")
        if not isinstance(self.domain, Domain):
            raise SpaceError(f"parameter {self.name!r} needs a Domain, got {self.domain!r}")
        if self.when is not None and not isinstance(self.when, Cond):
            raise SpaceError(f"parameter {self.name!r}: when must be a Cond, got {self.when!r}")

    def to_dict(self) -> dict:
        return {"name": self.name, "domain": self.domain.to_dict(),
                "when": None if self.when is None else self.when.to_dict()}
