"""Expressions and constraints: evaluation, printing, messages, declaration errors."""

import pytest

from search_spaces import Cond, Constraint, SpaceError, Var, cdiv


def test_expression_eval_and_text() -> None:
    e = Var("a") * Var("b") + 3
    assert e.eval({"a": 4, "b": 5}) == 23 and str(e) == "a*b+3"
    assert str(Var("a") * (Var("b") + 1)) == "a*(b+1)"
    assert str(Var("a") - (Var("b") - Var("c"))) == "a-(b-c)"
    assert str(Var("a") * (Var("b") // Var("c"))) == "a*(b//c)"
    assert (Var("a") * (Var("b") // Var("c"))).eval({"a": 3, "b": 7, "c": 2}) == 9
    assert str(cdiv(Var("n"), Var("t"))) == "cdiv(n, t)"
    assert cdiv(Var("n"), 4).eval({"n": 9}) == 3 and (100 % Var("n")).eval({"n": 7}) == 2
    assert (2 - Var("x")).eval({"x": True}) == 1
    assert (Var("a") * Var("b") % 3).vars() == {"a", "b"}


def test_message_template_is_filled_with_values() -> None:
    c = Constraint("gb_fits", Var("gb_tile") * Var("batch"), "<=", 128,
                   "{expr}={lhs} elements exceeds the global buffer ({rhs})")
    assert c.violation({"gb_tile": 64, "batch": 2}) is None
    assert c.violation({"gb_tile": 1024, "batch": 4}) == (
        "gb_fits: gb_tile*batch=4096 elements exceeds the global buffer (128)")


def test_default_message_shows_both_sides() -> None:
    c = Constraint("order", Var("inner"), "<=", Var("outer"))
    assert c.violation({"inner": 8, "outer": 4}) == "order: inner=8 must be <= outer=4"
    d = Constraint("divides", 4096 % Var("t"), "==", 0)
    assert d.violation({"t": 3}) == "divides: 4096%t=1 must be == 0"


def test_template_may_name_parameters() -> None:
    c = Constraint("acc", Var("outs") * Var("banks"), "<", 9, "{outs} outputs x {banks} banks")
    assert c.violation({"outs": 3, "banks": 3}) == "acc: 3 outputs x 3 banks"


def test_division_by_zero_is_a_violation() -> None:
    msg = Constraint("z", Var("a") // Var("b"), ">=", 1).violation({"a": 1, "b": 0})
    assert msg is not None and "divides by zero" in msg and "b=0" in msg


def test_applies_needs_active_vars_and_condition() -> None:
    c = Constraint("c", Var("a"), "<", 3, when=Cond("mode", "x"))
    assert c.applies({"a": 1, "mode": "x"}, {"a", "mode"})
    assert not c.applies({"a": 1, "mode": "y"}, {"a", "mode"})
    assert not c.applies({"mode": "x"}, {"mode"})


@pytest.mark.parametrize("kw", [
    {"op": "=<"},
    {"message": "{nope} is wrong"},
    {"message": "unbalanced {"},
    {"name": "has space"},
    {"when": "mode"},
])
def test_malformed_constraints_raise(kw) -> None:
    args = {"name": "c", "lhs": Var("a"), "op": "<=", "rhs": 4} | kw
    with pytest.raises(SpaceError):
        Constraint(**args)


def test_constraint_operands_must_be_ints_or_expressions() -> None:
    with pytest.raises(SpaceError):
        Constraint("c", Var("a"), "<=", 4.5)
    with pytest.raises(SpaceError):
        _ = Var("a") * 1.5
