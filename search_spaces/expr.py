"""Integer expressions over parameters, the left and right sides of constraints.

``Var("gb_tile") * Var("batch")`` builds a tree of frozen nodes that evaluates against a
point, prints as ``gb_tile*batch`` and names the parameters it reads. Supported: ``+ - *
// %`` with ints on either side, and :func:`cdiv` (ceiling division). Bool parameters
count as 0 and 1.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import Any

from search_spaces.errors import SpaceError

__all__ = ["BinOp", "Const", "Expr", "Var", "cdiv", "lift"]

_PREC = {"+": 1, "-": 1, "*": 2, "//": 2, "%": 2, "cdiv": 3}
_FN = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "//": lambda a, b: a // b,
    "%": lambda a, b: a % b,
    "cdiv": lambda a, b: -(-a // b),
}


def lift(x: Expr | int) -> Expr:
    """An Expr passes through; an int becomes a :class:`Const`."""
    if isinstance(x, Expr):
        return x
    if type(x) is int:
        return Const(x)
    raise SpaceError(f"constraint operands must be Expr or int, got {x!r}")


class Expr(abc.ABC):
    """Base of expression nodes; arithmetic operators build :class:`BinOp` nodes."""

    @abc.abstractmethod
    def eval(self, env: dict[str, Any]) -> int:
        """Value under ``env`` (parameter name -> value); ZeroDivisionError propagates."""

    @abc.abstractmethod
    def vars(self) -> frozenset[str]:
        """Names of the parameters the expression reads."""

    def __add__(self, o: Expr | int) -> BinOp:
        return BinOp("+", self, lift(o))

    def __radd__(self, o: int) -> BinOp:
        return BinOp("+", lift(o), self)

    def __sub__(self, o: Expr | int) -> BinOp:
        return BinOp("-", self, lift(o))

    def __rsub__(self, o: int) -> BinOp:
        return BinOp("-", lift(o), self)

    def __mul__(self, o: Expr | int) -> BinOp:
        return BinOp("*", self, lift(o))

    def __rmul__(self, o: int) -> BinOp:
        return BinOp("*", lift(o), self)

    def __floordiv__(self, o: Expr | int) -> BinOp:
        return BinOp("//", self, lift(o))

    def __rfloordiv__(self, o: int) -> BinOp:
        return BinOp("//", lift(o), self)

    def __mod__(self, o: Expr | int) -> BinOp:
        return BinOp("%", self, lift(o))

    def __rmod__(self, o: int) -> BinOp:
        return BinOp("%", lift(o), self)


@dataclass(frozen=True)
class Var(Expr):
    """The value of parameter ``name``."""

    name: str

    def eval(self, env: dict[str, Any]) -> int:
        return int(env[self.name])

    def vars(self) -> frozenset[str]:
        return frozenset((self.name,))

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class Const(Expr):
    """An integer literal (typically a hardware limit baked in by a space builder)."""

    value: int

    def eval(self, env: dict[str, Any]) -> int:
        return self.value

    def vars(self) -> frozenset[str]:
        return frozenset()

    def __str__(self) -> str:
        return str(self.value)


@dataclass(frozen=True)
class BinOp(Expr):
    """``a op b`` for op in ``+ - * // % cdiv``."""

    op: str
    a: Expr
    b: Expr

    def __post_init__(self) -> None:
        if self.op not in _FN:
            raise SpaceError(f"unknown operator {self.op!r} (known: {' '.join(_FN)})")

    def eval(self, env: dict[str, Any]) -> int:
        return _FN[self.op](self.a.eval(env), self.b.eval(env))

    def vars(self) -> frozenset[str]:
        return self.a.vars() | self.b.vars()

    def __str__(self) -> str:
        if self.op == "cdiv":
            return f"cdiv({self.a}, {self.b})"
        p = _PREC[self.op]
        left, right = str(self.a), str(self.b)
        if isinstance(self.a, BinOp) and _PREC[self.a.op] < p:
            left = f"({left})"
        b = self.b
        if isinstance(b, BinOp) and _PREC[b.op] <= p and not (b.op == self.op in ("+", "*")):
            right = f"({right})"
        return f"{left}{self.op}{right}"


def cdiv(a: Expr | int, b: Expr | int) -> BinOp:
    """Ceiling division ``ceil(a / b)`` of two expressions."""
    return BinOp("cdiv", lift(a), lift(b))
