"""Constraints: a comparison between two integer expressions over a space's parameters.

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
from dataclasses import dataclass
from typing import Any

from search_spaces.errors import SpaceError
from search_spaces.expr import Const, Expr, lift
from search_spaces.params import Cond, check_name, is_met

__all__ = ["Constraint"]

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
