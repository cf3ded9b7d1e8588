"""GEMV candidates for the cost-model tests: points of the product GEMV space at small
shapes, lowered with the library kernel and (``measure``) simulated."""

from __future__ import annotations

import numpy as np

from cost_models import Candidate
from search_spaces import Workload
from search_spaces.gemv import gemv_space, point_opts
from sim.hardware import Hardware
from sim.kernels import gemv
from sim.timing import simulate


def gemv_candidates(w: Workload, hw: Hardware, n: int, rng: np.random.Generator
                    ) -> list[Candidate]:
    """Up to ``n`` distinct valid PIM candidates of ``w`` on ``hw`` (seeded by ``rng``)."""
    space = gemv_space(w, hw)
    d = w.dims
    out: dict[tuple, Candidate] = {}
    for _ in range(20):
        for point in space.sample(rng, 4 * n):
            key = tuple(sorted(point.items()))
            if point["placement"] != "pim" or key in out:
                continue
            prog = gemv(hw, d["n"], d["k"], d["m"], point_opts(point)).program
            out[key] = Candidate(w, space, key, hw, prog)
            if len(out) == n:
                return list(out.values())
    return list(out.values())


def measure(candidates: list[Candidate]) -> np.ndarray:
    """Simulated latency (ns) of each candidate's program."""
    return np.asarray([simulate(c.program, c.hw).latency_ns for c in candidates])
