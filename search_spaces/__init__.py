"""The schedule-space language and the nouns it works on.

A :class:`Space` declares parameters (:class:`Param`) with domains (:class:`Categorical`,
:class:`IntRange`, :class:`PowersOfTwo`, :class:`Divisors`), conditions (:class:`Cond`)
and constraints (:class:`Constraint` over :class:`Var` expressions); one generic engine
validates points, enumerates, samples, fills points parameter by parameter and encodes
features. The language imports no search library: a strategy's adapter reads the
domains (integer ranges or finite lists) and drives its library with them. A
:class:`Schedule` is one point as a frozen, hashable, JSON value.
"""

from search_spaces.constraints import Constraint, Rule
from search_spaces.domains import Categorical, Divisors, Domain, IntRange, PowersOfTwo, Value
from search_spaces.errors import ScheduleError, SpaceError
from search_spaces.expr import Const, Expr, Var, cdiv
from search_spaces.params import Cond, Param
from search_spaces.schedule import Schedule
from search_spaces.space import Space
from search_spaces.workload import FAMILIES, Workload

__all__ = [
    "FAMILIES", "Categorical", "Cond", "Const", "Constraint", "Divisors", "Domain", "Expr",
    "IntRange", "Param", "PowersOfTwo", "Rule", "Schedule", "ScheduleError", "Space", "SpaceError",
    "Value", "Var", "Workload", "cdiv",
]
