"""Constraints: a comparison between two integer expressions over a space's parameters,
or a :class:`Rule` that a family's geometry states once as a function.

A constraint is data (so it takes part in the space's digest) and explains itself: its
``message`` is a template filled with the values that broke it, e.g. ::

    Constraint("gb_fits", Var("gb_tile") * Var("batch"), "<=", 128,
               "{expr}={lhs} elements exceeds the global buffer ({rhs})")

reports ``gb_fits: gb_tile*batch=4096 elements exceeds the global buffer (128)``. Template
fields: ``name expr lhs op rhs_expr rhs`` and every parameter the constraint reads. A
constraint applies only when ``when`` holds and every parameter it reads is active; the
space decides that, this class only evaluates.
"""

from __future__ import annotations

import operator
import string
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from search_spaces.errors import SpaceError
from search_spaces.expr import Const, Expr, lift
from search_spaces.params import Cond, check_name, is_met

__all__ = ["Constraint", "Rule"]

_OPS = {"<=": operator.le, "<": operator.lt, ">=": operator.ge, ">": operator.gt,
        "==": operator.eq, "!=": operator.ne}
_RESERVED = ("name", "expr", "lhs", "op", "rhs_expr", "rhs")


@dataclass(frozen=True)
class Constraint:
    """``lhs op rhs`` must hold for every valid point where the constraint applies."""

    name: str
    lhs: Expr
    op: str
    rhs: Expr
    message: str = ""
    when: Cond | None = None

    def __post_init__(self) -> None:
        check_name(self.name, "constraint")
        object.__setattr__(self, "lhs", lift(self.lhs))
        object.__setattr__(self, "rhs", lift(self.rhs))
        if self.op not in _OPS:
            raise SpaceError(f"constraint {self.name!r}: op {self.op!r} is not one of "
                             f"{' '.join(_OPS)}")
        if self.when is not None and not isinstance(self.when, Cond):
            raise SpaceError(f"constraint {self.name!r}: when must be a Cond, got {self.when!r}")
        try:
            fields = {f for _, f, _, _ in string.Formatter().parse(self.message) if f is not None}
        except ValueError as e:
            raise SpaceError(f"constraint {self.name!r}: bad message template: {e}") from None
        unknown = fields - set(_RESERVED) - self.vars()
        if unknown:
            raise SpaceError(f"constraint {self.name!r}: message uses unknown fields "
                             f"{sorted(unknown)}; use {', '.join(_RESERVED)} or its parameters")

    def vars(self) -> frozenset[str]:
        """Parameters the comparison reads (not counting ``when``)."""
        return self.lhs.vars() | self.rhs.vars()

    def applies(self, point: dict[str, Any], on: set[str] | frozenset[str]) -> bool:
        """Whether to check it: ``when`` holds and every parameter it reads is in ``on``."""
        return self.vars() <= on and is_met(self.when, point, on)

    def violation(self, point: dict[str, Any]) -> str | None:
        """``None`` when the comparison holds under ``point``, else the filled-in reason."""
        env = {v: point[v] for v in self.vars()}
        try:
            lhs, rhs = self.lhs.eval(env), self.rhs.eval(env)
        except ZeroDivisionError:
            shown = ", ".join(f"{k}={env[k]!r}" for k in sorted(env))
            return f"{self.name}: {self.lhs} {self.op} {self.rhs} divides by zero at {shown}"
        if _OPS[self.op](lhs, rhs):
            return None
        rhs_expr = str(self.rhs)
        fill = dict(env, name=self.name, expr=str(self.lhs), lhs=lhs, op=self.op,
                    rhs_expr=rhs_expr, rhs=rhs)
        if self.message:
            return f"{self.name}: {self.message.format(**fill)}"
        right = rhs_expr if isinstance(self.rhs, Const) else f"{rhs_expr}={rhs}"
        return f"{self.name}: {self.lhs}={lhs} must be {self.op} {right}"

    def to_dict(self) -> dict:
        return {"name": self.name, "lhs": str(self.lhs), "op": self.op, "rhs": str(self.rhs),
                "message": self.message,
                "when": None if self.when is None else self.when.to_dict()}


@dataclass(frozen=True)
class Rule:
    """A validity rule whose one statement is a function of the family's geometry.

    ``check(values)`` receives the values of the parameters in ``reads`` and returns why
    they cannot be laid out, or None. The family's code generator runs the same function,
    so the space and the lowering accept the same points by construction. ``key`` names
    the rule and everything it was built for (hardware, shape): equality, hashing and the
    space's digest use it, never the function object. A rule applies, like a
    :class:`Constraint`, when ``when`` holds and every parameter it reads is active.
    """

    name: str
    reads: tuple[str, ...]
    check: Callable[[dict[str, Any]], str | None] = field(compare=False, repr=False)
    key: tuple = ()
    when: Cond | None = None

    def __post_init__(self) -> None:
        check_name(self.name, "rule")
        object.__setattr__(self, "reads", tuple(self.reads))
        for r in self.reads:
            check_name(r, f"rule {self.name!r} parameter")
        if self.when is not None and not isinstance(self.when, Cond):
            raise SpaceError(f"rule {self.name!r}: when must be a Cond, got {self.when!r}")

    def vars(self) -> frozenset[str]:
        return frozenset(self.reads)

    def applies(self, point: dict[str, Any], on: set[str] | frozenset[str]) -> bool:
        return self.vars() <= on and is_met(self.when, point, on)

    def violation(self, point: dict[str, Any]) -> str | None:
        why = self.check({v: point[v] for v in self.reads})
        return None if why is None else f"{self.name}: {why}"

    def to_dict(self) -> dict:
        return {"name": self.name, "reads": list(self.reads), "key": [str(x) for x in self.key],
                "when": None if self.when is None else self.when.to_dict()}
