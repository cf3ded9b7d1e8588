"""Test doubles and the contract suite every cost model runs.

:func:`gemv_space` is a minimal space mirroring ``sim.kernels.GemvOpts`` and
:func:`gemv_candidates` draws valid points of it, lowers them with ``sim.kernels.gemv``
and (with :func:`measure`) times them on ``sim.timing``: data for tests and for training
without the engine. :func:`check_contract` is the shared behaviour test of a model kind.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from search_spaces import (
    Categorical,
    Constraint,
    Divisors,
    IntRange,
    Param,
    PowersOfTwo,
    Space,
    Var,
    Workload,
)
from sim.hardware import Hardware
from sim.kernels import GemvOpts, gemv
from sim.timing import simulate

from .base import Candidate, CostModel

__all__ = ["check_contract", "gemv_candidates", "gemv_space", "measure"]


def gemv_space(w: Workload, hw: Hardware) -> Space:
    """Every ``GemvOpts`` decision for ``w`` (family gemv or gemm) on ``hw``."""
    d, p = w.dims, hw.pim
    modes = ("dot", "lane") if p.adder_tree else ("bcast", "lane")
    params = [
        Param("mode", Categorical(modes)),
        Param("channels", Divisors(hw.org.channels)),
        Param("k_split", Divisors(hw.org.channels)),
        Param("gb_tile", PowersOfTwo(1, hw.gb_elems)),
        Param("registers", IntRange(1, p.registers)),
        Param("batch_rows", IntRange(1, d["m"])),
        Param("loop_order", Categorical(("row_outer", "tile_outer"))),
        Param("double_buffer", Categorical((False, True))),
    ]
    if p.banks_per_unit == 2:
        params.append(Param("interleave", Categorical((False, True))))
    cons = (
        Constraint("split_divides", Var("channels") % Var("k_split"), "==", 0,
                   "k_split={k_split} must divide channels={channels}"),
        Constraint("gb_fits", Var("gb_tile") * Var("batch_rows"), "<=", hw.gb_elems,
                   "{expr}={lhs} exceeds the global buffer ({rhs})"),
        Constraint("regs_fit", Var("registers") * Var("batch_rows"), "<=", p.registers,
                   "{expr}={lhs} exceeds the register file ({rhs})"),
    )
    return Space("gemv_opts", 1, tuple(params), cons)


def _candidate(w: Workload, space: Space, point: dict, hw: Hardware) -> Candidate | None:
    d = w.dims
    opts = GemvOpts(**point)
    if opts.validate(hw, d["n"], d["k"], d["m"]):
        return None
    kern = gemv(hw, d["n"], d["k"], d["m"], opts)
    return Candidate(w, space, tuple(sorted(point.items())), hw, kern.program)


def gemv_candidates(w: Workload, hw: Hardware, n: int, rng: np.random.Generator,
                    max_draws: int = 20_000) -> list[Candidate]:
    """Up to ``n`` distinct valid candidates of ``w`` on ``hw`` (seeded by ``rng``)."""
    space = gemv_space(w, hw)
    out: dict[tuple, Candidate] = {}
    draws = 0
    while len(out) < n and draws < max_draws:
        batch = space.sample(rng, min(64, 2 * (n - len(out)) + 4))
        draws += len(batch)
        for point in batch:
            key = tuple(sorted(point.items()))
            if key not in out and (c := _candidate(w, space, point, hw)) is not None:
                out[key] = c
                if len(out) == n:
                    break
    return list(out.values())


def measure(candidates: list[Candidate]) -> np.ndarray:
    """Simulated latency (ns) of each candidate's program."""
    return np.asarray([simulate(c.program, c.hw).latency_ns for c in candidates])


def check_contract(make: Callable[[], CostModel], train: list[Candidate],
                   latencies: np.ndarray, test: list[Candidate], tmp: Path) -> None:
    """The behaviour every cost model promises; raises AssertionError on a breach."""
    model = make()
    before = np.asarray(model.predict(test))
    assert before.shape == (len(test),) and np.all(np.isfinite(before)), "predict before fit"
    assert np.asarray(model.predict([])).shape == (0,), "predict on no candidates"
    lat = np.array(latencies, dtype=float)
    lat[0] = np.inf  # a failed measurement must be skipped, not break the fit
    model.fit(train, lat)
    model.fit(train, lat)  # refit with all data again
    after = np.asarray(model.predict(test))
    assert after.shape == (len(test),) and np.all(np.isfinite(after)), "predict after fit"
    path = tmp / f"{model.name}.ubj"
    model.save(path)
    again = type(model).load(path)
    assert np.array_equal(np.asarray(again.predict(test)), after), "save/load changes output"
