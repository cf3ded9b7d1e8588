"""Test doubles and helpers for the search: a small GEMV lowering, a context builder.

:class:`FakeGemvLowering` has a space of a few dozen points (mode, reduction split, loop
order, interleave, double buffering), lowers every point with the shipped PIM GEMV kernel
and can be told to fail on chosen points, so tests of the tuner, the scheduler and the
runners control failures and exhaust a space quickly. Install it with
``monkeypatch.setitem(FAMILIES, "gemv", FakeGemvLowering(...))``. :func:`context` builds
a :class:`SearchContext` the way an edge does (a database path opened here).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from autosched.database import Database, open_database
from autosched.families import Family
from autosched.measure import Runner
from autosched.search import SearchContext
from search_spaces import Categorical, PowersOfTwo, Space, Workload
from sim.bound import bound as program_bound
from sim.errors import AutoschedError
from sim.hardware import Hardware
from sim.kernels import GemvOpts, Kernel, gemv

__all__ = ["FakeGemvLowering", "FakeLoweringError", "context"]


def context(hw: Hardware, db: str | Path | Database, runner: Runner, *, trials: int = 0,
            **kw: object) -> SearchContext:
    """A search context on ``hw``, ``db`` (a path is opened here) and ``runner``; ``kw``
    as :meth:`SearchContext.of` takes them (strategy, cost_model, seed, ...)."""
    database = db if isinstance(db, Database) else open_database(db)
    return SearchContext.of(hardware=hw, database=database, runner=runner, trials=trials, **kw)


class FakeLoweringError(AutoschedError):
    """Raised by :class:`FakeGemvLowering` for the points its ``fail`` predicate selects."""


class FakeGemvLowering(Family):
    """GEMV ``y[m, n] = x[m, k] W[n, k]^T`` through the shipped kernel; a test double.

    ``fail(point)`` true makes ``lower`` raise :class:`FakeLoweringError`; ``max_split``
    caps the reduction split so the space stays small. The bound is the smallest program
    bound over every point of the space, hence a true lower bound of every schedule.
    """

    ops = ("gemv",)

    def __init__(self, fail: Callable[[dict], bool] | None = None, max_split: int = 4,
                 version: int = 1) -> None:
        self.fail = fail
        self.max_split = max_split
        self.version = version
        self._bounds: dict[tuple[str, str], float] = {}

    def space(self, workload: Workload, hw: Hardware) -> Space:
        from search_spaces import Param

        modes = ("dot", "bcast", "lane") if hw.pim.adder_tree else ("bcast", "lane")
        split = min(self.max_split, hw.org.channels)
        return Space("fake_gemv", self.version, (
            Param("mode", Categorical(modes)),
            Param("k_split", PowersOfTwo(1, split)),
            Param("loop_order", Categorical(("row_outer", "tile_outer"))),
            Param("interleave", Categorical((False, True))),
            Param("double_buffer", Categorical((False, True))),
        ))

    def reference(self, node, ops, tensors, env):
        raise AssertionError("the fake GEMV is measured, never evaluated")

    def default(self, workload: Workload, hw: Hardware) -> dict:
        return {"mode": "bcast", "k_split": 1, "loop_order": "row_outer",
                "interleave": False, "double_buffer": False}

    def lower(self, workload: Workload, point: dict, hw: Hardware) -> Kernel:
        if self.fail is not None and self.fail(point):
            raise FakeLoweringError(f"fake lowering refuses {sorted(point.items())}")
        d = workload.dims
        return gemv(hw, d["n"], d["k"], d["m"], GemvOpts(**point))

    def bound(self, workload: Workload, hw: Hardware) -> float:
        key = (workload.key, hw.fingerprint)
        if key not in self._bounds:
            d = workload.dims
            ns = []
            for p in self.space(workload, hw).enumerate():
                try:
                    k = gemv(hw, d["n"], d["k"], d["m"], GemvOpts(**p))
                except AutoschedError:
                    continue
                ns.append(program_bound(k.program, hw).ns)
            self._bounds[key] = min(ns, default=0.0)
        return self._bounds[key]

    def tensors(self, workload: Workload) -> tuple[str, ...]:
        return ("W",)
