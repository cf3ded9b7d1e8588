"""Exhaustive walks over a space: the exact size and the enumeration of valid points.

Both walk parameters in declaration order, so a condition always sees the value of the
parameter it names. ``count`` branches only on parameters that condition others and
multiplies the rest, so it stays cheap on large spaces; ``walk`` checks each constraint as
soon as the last parameter it depends on is decided, pruning whole subtrees.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from search_spaces.constraints import Constraint, Rule
from search_spaces.params import is_met

if TYPE_CHECKING:
    from search_spaces.space import Space

__all__ = ["count", "walk"]

Point = dict[str, Any]


def count(space: Space) -> int:
    """Number of points allowed by domains and conditions (constraints ignored)."""
    conditioning = {p.when.param for p in space.params if p.when is not None}

    def rec(i: int, point: Point, on: set[str]) -> int:
        if i == len(space.params):
            return 1
        p = space.params[i]
        if not is_met(p.when, point, on):
            return rec(i + 1, point, on)
        if p.name not in conditioning:
            return len(p.domain) * rec(i + 1, point, on)
        total = 0
        on.add(p.name)
        for v in p.domain.values():
            point[p.name] = v
            total += rec(i + 1, point, on)
        del point[p.name]
        on.discard(p.name)
        return total

    return rec(0, {}, set())


def _stages(space: Space) -> list[list[Constraint | Rule]]:
    """Constraints grouped by the position of the last parameter they depend on."""
    pos = {p.name: i for i, p in enumerate(space.params)}
    stages: list[list[Constraint | Rule]] = [[] for _ in range(len(space.params) + 1)]
    for c in space.constraints:
        deps = set(c.vars()) | ({c.when.param} if c.when is not None else set())
        stages[max((pos[d] + 1 for d in deps), default=0)].append(c)
    return stages


def walk(space: Space) -> Iterator[Point]:
    """Every valid point: declaration order, then each domain's value order."""
    stages = _stages(space)

    def ok(stage: int, point: Point, on: set[str]) -> bool:
        return all(not c.applies(point, on) or c.violation(point) is None for c in stages[stage])

    def rec(i: int, point: Point, on: set[str]) -> Iterator[Point]:
        if i == len(space.params):
            yield dict(point)
            return
        p = space.params[i]
        if not is_met(p.when, point, on):
            if ok(i + 1, point, on):
                yield from rec(i + 1, point, on)
            return
        on.add(p.name)
        for v in p.domain.values():
            point[p.name] = v
            if ok(i + 1, point, on):
                yield from rec(i + 1, point, on)
        del point[p.name]
        on.discard(p.name)

    if ok(0, {}, set()):
        yield from rec(0, {}, set())
