"""Neighbourhood moves: points a few parameter changes from a good one, by the space's structure.

A one-change neighbour of a point sets one active parameter to another value of its
domain; parameters that the change switches on take their domain's first value and
those it switches off disappear (the space's own conditions decide, through
:meth:`~search_spaces.Space.fill`). Constraints are not checked here: the caller's pool
validates and lowers what it keeps. Moves never draw from an enumeration, so they work
on spaces too large to enumerate.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from search_spaces import Schedule, Space
from search_spaces.domains import same

__all__ = ["around", "one_change"]


def one_change(space: Space, point: dict) -> Iterator[dict]:
    """Every point differing from ``point`` in the value of exactly one active parameter,
    in declaration order then domain order (deterministic)."""
    for p in space.params:
        if p.name not in point:
            continue
        for v in p.domain.values():
            if same(v, point[p.name]):
                continue
            yield space.fill(lambda q, _n=p.name, _v=v: _v if q.name == _n else
                             point.get(q.name, q.domain.values()[0]))


def around(space: Space, best: Sequence[dict], rng: np.random.Generator, *, n_second: int,
           n_two: int) -> list[dict]:
    """Moves from the measured points ``best`` (fastest first), distinct by schedule key:
    every one-change neighbour of ``best[0]``, ``n_second`` drawn from the one-change
    neighbours of each of the next points, and ``n_two`` two-change neighbours of
    ``best[0]`` (a random one-change neighbour of a random one-change neighbour)."""
    out: dict[str, dict] = {}

    def add(ps: Sequence[dict]) -> None:
        for q in ps:
            out.setdefault(Schedule.of(space, q).key, q)

    if not best:
        return []
    first = list(one_change(space, best[0]))
    add(first)
    for p in best[1:]:
        near = list(one_change(space, p))
        add([near[i] for i in sorted(rng.permutation(len(near))[:n_second])])
    for _ in range(n_two if first else 0):
        mid = first[int(rng.integers(len(first)))]
        far = list(one_change(space, mid))
        if far:
            add([far[int(rng.integers(len(far)))]])
    out.pop(Schedule.of(space, best[0]).key, None)
    return list(out.values())
