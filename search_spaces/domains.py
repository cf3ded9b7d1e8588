"""Domains: the finite set of values one schedule parameter may take.

Every domain is a frozen dataclass with a finite, ordered ``values()``; ``contains`` is
strict about types (``True`` is not ``1``); ``encode`` gives the parameter's slice of a
feature vector (``None`` = the parameter is inactive, encoded as -1 in every slot). A
domain is either an integer range (:class:`IntRange`: bounds, step, log scale) or a
finite list of values; a search library's adapter reads it as one or the other
(``autosched.search.optuna_adapter``), so the language itself needs none.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from search_spaces.errors import SpaceError

__all__ = ["Categorical", "Divisors", "Domain", "IntRange", "PowersOfTwo", "PowersOfTwoAnd",
           "Value", "norm", "same"]

Value = int | str | bool
_PLAIN = (int, str, bool)
INACTIVE = -1.0


def norm(v: Any) -> Any:
    """Turn numpy scalars into the plain Python value; anything else passes through."""
    if isinstance(v, np.bool_):
        return bool(v)
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, np.str_):
        return str(v)
    return v


def same(a: Any, b: Any) -> bool:
    """Equality that tells ``True`` from ``1``: same type and equal after :func:`norm`."""
    if type(a) is type(b) and type(a) in _PLAIN:
        return a == b
    a, b = norm(a), norm(b)
    return type(a) is type(b) and a == b


def _is_int(v: Any) -> bool:
    return type(norm(v)) is int


class Domain:
    """Common behaviour; subclasses provide ``_values``."""

    _values: tuple[Value, ...]

    def values(self) -> tuple[Value, ...]:
        """All values, in the domain's fixed order."""
        return self._values

    def __len__(self) -> int:
        return len(self._values)

    def contains(self, v: Any) -> bool:
        """Whether ``v`` is one of ``values()`` (integers only for numeric domains)."""
        return _is_int(v) and norm(v) in self._set

    @cached_property
    def _set(self) -> frozenset:
        return frozenset(self._values)

    @property
    def width(self) -> int:
        """Number of feature slots."""
        return 1

    def feature_names(self, name: str) -> tuple[str, ...]:
        return (name,)

    def encode(self, v: Value | None) -> tuple[float, ...]:
        """Feature slots for value ``v``; ``None`` (inactive) is -1 in every slot."""
        return (INACTIVE,) if v is None else (float(norm(v)),)

    def to_dict(self) -> dict:
        """Structural description (kind + fields) used in digests and reports."""
        d = {"kind": type(self).__name__}
        d.update({k: (list(v) if isinstance(v, tuple) else v) for k, v in vars(self).items()
                  if not k.startswith("_")})
        return d


@dataclass(frozen=True)
class Categorical(Domain):
    """An unordered choice among ints, strings or bools (not a mix of bools and ints)."""

    choices: tuple[Value, ...]

    def __post_init__(self) -> None:
        choices = tuple(norm(c) for c in self.choices)
        object.__setattr__(self, "choices", choices)
        if not choices:
            raise SpaceError("Categorical needs at least one choice")
        kinds = {type(c) for c in choices}
        if not kinds <= {int, str, bool}:
            raise SpaceError(f"Categorical choices must be int, str or bool; got {choices!r}")
        if {int, bool} <= kinds or len(set(choices)) != len(choices):
            raise SpaceError(f"Categorical choices must be distinct and not mix bool with int: "
                             f"{choices!r}")

    @cached_property
    def _values(self) -> tuple[Value, ...]:
        return self.choices

    def contains(self, v: Any) -> bool:
        return any(same(v, c) for c in self.choices)

    @property
    def width(self) -> int:
        return len(self.choices)

    def feature_names(self, name: str) -> tuple[str, ...]:
        return tuple(f"{name}={c}" for c in self.choices)

    def encode(self, v: Value | None) -> tuple[float, ...]:
        if v is None:
            return (INACTIVE,) * len(self.choices)
        return tuple(1.0 if same(v, c) else 0.0 for c in self.choices)


@dataclass(frozen=True)
class IntRange(Domain):
    """``lo, lo+step, ..., hi`` (``hi`` must be reachable); ``log`` samples on a log scale."""

    lo: int
    hi: int
    step: int = 1
    log: bool = False

    def __post_init__(self) -> None:
        if not all(_is_int(x) for x in (self.lo, self.hi, self.step)):
            raise SpaceError(f"IntRange bounds and step must be ints: {self}")
        if self.step < 1 or self.lo > self.hi:
            raise SpaceError(f"IntRange needs step >= 1 and lo <= hi: {self}")
        if (self.hi - self.lo) % self.step:
            last = self.lo + (self.hi - self.lo) // self.step * self.step
            raise SpaceError(f"IntRange hi={self.hi} is not lo + k*step; use hi={last}")
        if self.log and (self.step != 1 or self.lo < 1):
            raise SpaceError(f"IntRange with log=True needs step=1 and lo >= 1: {self}")

    @cached_property
    def _values(self) -> tuple[Value, ...]:
        return tuple(range(self.lo, self.hi + 1, self.step))

    def contains(self, v: Any) -> bool:
        return (_is_int(v) and self.lo <= norm(v) <= self.hi
                and (norm(v) - self.lo) % self.step == 0)


@dataclass(frozen=True)
class PowersOfTwo(Domain):
    """The powers of two in ``[lo, hi]`` (at least one)."""

    lo: int
    hi: int

    def __post_init__(self) -> None:
        if not (_is_int(self.lo) and _is_int(self.hi)) or self.lo < 1 or not self._values:
            raise SpaceError(f"PowersOfTwo needs ints 1 <= lo <= hi around a power of 2: {self}")

    @cached_property
    def _values(self) -> tuple[Value, ...]:
        out, p = [], 1
        while p <= self.hi:
            if p >= self.lo:
                out.append(p)
            p *= 2
        return tuple(out)


@dataclass(frozen=True)
class PowersOfTwoAnd(PowersOfTwo):
    """The powers of two in ``[lo, hi]`` and the ``extra`` ints (a shipped kernel's own
    choice that is not a power of two), in increasing order; one feature slot, like
    :class:`PowersOfTwo`."""

    extra: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "extra", tuple(self.extra))
        if not all(_is_int(x) and x >= 1 for x in self.extra):
            raise SpaceError(f"PowersOfTwoAnd extra values must be ints >= 1: {self}")
        super().__post_init__()

    @cached_property
    def _values(self) -> tuple[Value, ...]:
        return tuple(sorted(set(PowersOfTwo(self.lo, self.hi).values()) | set(self.extra)))


@dataclass(frozen=True)
class Divisors(Domain):
    """The divisors of ``n`` within ``[lo, hi]`` (``hi=None``: up to ``n``), at least one."""

    n: int
    lo: int = 1
    hi: int | None = None

    def __post_init__(self) -> None:
        ok = all(_is_int(x) for x in (self.n, self.lo)) and (self.hi is None or _is_int(self.hi))
        if not ok or self.n < 1 or not self._values:
            raise SpaceError(f"Divisors needs an int n >= 1 with a divisor in [lo, hi]: {self}")

    @cached_property
    def _values(self) -> tuple[Value, ...]:
        hi = self.n if self.hi is None else min(self.hi, self.n)
        small = [d for d in range(1, math.isqrt(self.n) + 1) if self.n % d == 0]
        every = sorted(set(small) | {self.n // d for d in small})
        return tuple(d for d in every if self.lo <= d <= hi)
