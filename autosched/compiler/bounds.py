"""The analytical lower bound of a whole step, valid whatever the placement and overlap.

Each node can run on PIM or on the host (or any mix, which the bound relaxes to a
fraction of each). A placement costs best-case time on three things:

* ``dev``: the device's channels (in-bank work, or weights and KV streamed to the host),
  as total work over all channels, so ops on disjoint channels cannot beat it either;
* ``host``: the host engine (one in-order processor);
* ``chain``: time between the node's inputs being ready and its output being ready
  (a host GEMV's weight reads do not depend on its input, so its chain is the multiply).

The step takes at least the longest dependency path of the nodes' smallest ``chain``, and
at least ``min over placements of max(total dev, total host)`` (a two-resource LP solved
exactly through its dual), and at least the link time of its collectives. The bound is
the largest of these; no program the compiler emits, overlapped or not, beats it.
"""

from __future__ import annotations

import functools

from autosched.families import Option, family_of
from search_spaces import Workload
from sim.hardware import Hardware

__all__ = ["Option", "node_options", "resource_bound", "step_bound"]


@functools.lru_cache(maxsize=4096)
def node_options(w: Workload, hw: Hardware) -> tuple[Option, ...]:
    """The placements of ``w`` as :class:`Option` s, from its family (remembered: a pure
    function)."""
    return family_of(w).options(w, hw)


def resource_bound(items: list[tuple[int, tuple[Option, ...]]]) -> float:
    """``min`` over fractional placements of ``max(total dev, total host)``;
    ``items`` holds (count, options) per distinct node."""
    const_d = const_h = 0.0
    pairs: list[tuple[int, Option, Option]] = []
    for count, opts in items:
        if len(opts) == 1:
            const_d += count * opts[0].dev
            const_h += count * opts[0].host
        else:
            pairs.append((count, opts[0], opts[1]))

    def g(mu: float) -> float:
        v = mu * const_d + (1 - mu) * const_h
        for c, a, b in pairs:
            v += c * min(mu * a.dev + (1 - mu) * a.host, mu * b.dev + (1 - mu) * b.host)
        return v

    cands = {0.0, 1.0}
    for _, a, b in pairs:
        den = (a.dev - b.dev) - (a.host - b.host)
        if den:
            mu = (b.host - a.host) / den
            if 0.0 < mu < 1.0:
                cands.add(mu)
    return max(g(mu) for mu in cands)


def step_bound(nodes, hw: Hardware, *, after: dict[str, float] | None = None,
               link_ns: float = 0.0) -> float:
    """The bound of one step's nodes (an OpGraph, or a pipeline stage's nodes in order) on
    one device (see the module docstring). ``after[name]``: time on the dependency chain
    right after node ``name`` (a collective on its output); ``link_ns``: the link time of
    the step's collectives."""
    cache: dict[str, tuple[Option, ...]] = {}
    counts: dict[str, int] = {}
    path: dict[str, float] = {}
    after = after or {}
    for n in nodes:
        key = n.workload.key
        if key not in cache:
            cache[key] = node_options(n.workload, hw)
        counts[key] = counts.get(key, 0) + 1
        start = max((path[i] for i in n.inputs if i in path), default=0.0)
        path[n.name] = start + min(o.chain for o in cache[key]) + after.get(n.name, 0.0)
    chain = max(path.values(), default=0.0)
    return max(chain, link_ns, resource_bound([(counts[k], cache[k]) for k in cache]))
