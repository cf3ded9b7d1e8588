"""The one runner behind the regression suite and the ``experiments/bench_*`` tables.

:class:`Runner` measures a case (:mod:`.cases`) into a :class:`CaseResult`. Every
case is timed ``repeats`` times and its wall-clock figures are the medians; the simulated
figures of every repeat must agree exactly (the simulator is deterministic; a repeat that
differs is an internal error). A case that cannot be measured becomes a result with its
error message (a model step keeps its operators' figures when each kernel builds alone,
e.g. when the whole program's weights do not fit the device) and the run goes on.

Model cases: ``compile_s`` is ``compile_model`` on the already captured graph with the
kernel cache emptied first (lowering, validation, linking; the torch capture is not
part of it), ``simulate_s`` the cycle-level simulation of the linked program. The bound is
the sum over nodes of each family's bound, as ``autosched simulate`` reports it.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import replace
from functools import partial
from pathlib import Path

import autosched.compiler.compile as compile_mod
from autosched.codegen import lowering_for
from autosched.compiler import compile_model, library_choice, plain_memory_ns
from autosched.frontend import ModelConfig, OpGraph, model_graph
from autosched.lookup import lookup
from search_spaces import Schedule, Workload
from search_spaces.fusion import FULL_FUSION
from sim.errors import AutoschedError, CapacityError, InternalError
from sim.figures import gemv_figures
from sim.hardware import Hardware
from sim.hwio import LIMITS, load_hardware
from sim.timing import simulate

from .cases import Case, KernelCase, ModelCase, TuneCase, case_kind, resolve_model
from .results import CaseResult, OpFigures
from .sources import ScheduleSource
from .systems import is_system, system_result
from .tuned import TUNED_PATH, open_schedules

__all__ = ["Runner", "run_case"]


def _timed(fn: Callable[[], object]) -> tuple[object, float]:
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


class Runner:
    """Measures cases; per-operator figures are shared between the cases of one runner.

    Not thread safe. ``tuned`` is where the tuned cases' schedules come from (the
    checked-in export by default; see :func:`.tuned.open_schedules`), opened on first need.
    """

    def __init__(self, *, repeats: int = 3,
                 tuned: str | Path | ScheduleSource = TUNED_PATH) -> None:
        if not isinstance(repeats, int) or repeats < 1:
            raise AutoschedError(f"repeats must be an int >= 1, got {repeats!r}")
        self.repeats = repeats
        self._tuned_src = tuned
        self._tuned: ScheduleSource | None = None
        self._ops: dict[tuple[str, str, str], tuple[float, float]] = {}
        self._bounds: dict[tuple[str, str], float] = {}

    def run(self, case: Case) -> CaseResult:
        """The figures of ``case``, or a result carrying the error that stopped it."""
        kind = case_kind(case)
        try:
            if isinstance(case, ModelCase):
                if is_system(case.hw):
                    return system_result(case, self.repeats)
                return self._model(case)
            if isinstance(case, KernelCase):
                return self._kernel(case)
            return self._tune(case)
        except AutoschedError as e:
            return CaseResult(case.id, kind, ops=self._ops_of_failed(case),
                              error=" ".join(str(e).split()))

    def _ops_of_failed(self, case: Case) -> tuple[OpFigures, ...]:
        """A model step that could not be measured whole still has its operators' figures
        when each kernel builds alone (e.g. a program whose weights do not fit)."""
        if not isinstance(case, ModelCase):
            return ()
        try:
            return self.kernels_alone(case)
        except AutoschedError:
            return ()

    def run_all(self, cases: Iterable[Case],
                progress: Callable[[Case, CaseResult], None] | None = None
                ) -> list[CaseResult]:
        out = []
        for c in cases:
            out.append(self.run(c))
            if progress is not None:
                progress(c, out[-1])
        return out

    # -- model steps ------------------------------------------------------------------

    def tuned(self) -> ScheduleSource:
        if self._tuned is None:
            self._tuned = open_schedules(self._tuned_src)
        return self._tuned

    def _schedules(self, case: ModelCase, graph: OpGraph, hw: Hardware
                   ) -> dict[str, Schedule] | str | None:
        """What ``compile_model(schedules=...)`` gets: the tuned source's choices, the
        library kernels, or None (each family's default)."""
        if case.schedules == "tuned":
            return {k: c.schedule for k, c in self.tuned().choices(graph, hw).items()}
        return "library" if case.schedules == "library" else None

    def _step(self, case: ModelCase) -> tuple[ModelConfig, Hardware, OpGraph]:
        cfg, hw = resolve_model(case.model), load_hardware(case.hw)
        fusion = dict(FULL_FUSION) if case.fusion == "full" else {}
        return cfg, hw, model_graph(cfg, fusion=fusion, phase=case.phase, batch=case.batch,
                                    context=case.context)[1]

    def kernels_alone(self, case: ModelCase) -> tuple[OpFigures, ...]:
        """Per distinct operator of the step, its kernel built and simulated alone, without
        linking the program (the same rows a measured case carries)."""
        _, hw, graph = self._step(case)
        schedules = self._schedules(case, graph, hw)
        if not isinstance(schedules, dict):
            choose = library_choice if schedules == "library" else partial(lookup, None)
            schedules = {n.name: choose(n.workload, hw).schedule for n in graph}
        return self._op_rows(graph, hw, schedules)

    def _model(self, case: ModelCase) -> CaseResult:
        cfg, hw, graph = self._step(case)
        step = dict(phase=case.phase, batch=case.batch, context=case.context)
        schedules = self._schedules(case, graph, hw)
        compile_s, simulate_s, seen = [], [], set()
        info: dict[str, float] = {}
        if case.grow:
            hw = self._grown(cfg, hw, graph, schedules, step)
            if hw.org.rows_per_bank != load_hardware(case.hw).org.rows_per_bank:
                info["rows_per_bank"] = hw.org.rows_per_bank
        for _ in range(self.repeats):
            compile_mod._build.cache_clear()  # lower every kernel again: the cold compile
            cm, t = _timed(lambda: compile_model(cfg, hw, graph=graph, schedules=schedules,
                                                 **step))
            res, ts = _timed(lambda cm=cm: simulate(cm.program, hw))
            compile_s.append(t)
            simulate_s.append(ts)
            seen.add((res.latency_ns, res.energy_pj))
        if len(seen) != 1:
            raise InternalError(f"{case.id}: {len(seen)} different simulated results over "
                                f"{self.repeats} identical runs: {sorted(seen)}")
        ops = self._op_rows(graph, hw, {k: c.schedule for k, c in cm.choices.items()})
        bound = sum(self._bound(n.workload, hw) for n in graph)
        figures = {"latency_ns": res.latency_ns, "energy_pj": res.energy_pj,
                   "bound_ns": bound}
        tokens = graph.batch * graph.tokens
        info.update({"tokens_per_s": tokens / (res.latency_ns * 1e-9),
                     "latency_over_bound": res.latency_ns / bound})
        if case.baseline:
            figures["baseline_ns"] = plain_memory_ns(cfg, hw, **step)
            info["speedup_vs_baseline"] = figures["baseline_ns"] / res.latency_ns
        wall = {"compile_s": statistics.median(compile_s),
                "simulate_s": statistics.median(simulate_s)}
        return CaseResult(case.id, "model", figures, ops, wall, info)

    @staticmethod
    def _grown(cfg: ModelConfig, hw: Hardware, graph: OpGraph,
               schedules: dict[str, Schedule] | str | None, step: dict) -> Hardware:
        """``hw``, or ``hw`` with the rows per bank (a power of two) the step's program
        needs when it does not fit (``ModelCase.grow``); every timing is unchanged."""
        try:
            compile_model(cfg, hw, graph=graph, schedules=schedules, **step)
            return hw
        except CapacityError as e:
            per_row = e.capacity // hw.org.rows_per_bank
            rows = 1 << (-(-e.needed // per_row) - 1).bit_length()
            if rows > LIMITS["org.rows_per_bank"]:
                raise
            return replace(hw, name=f"{hw.name} ({rows} rows per bank)",
                           org=replace(hw.org, rows_per_bank=rows))

    def _bound(self, w: Workload, hw: Hardware) -> float:
        key = (w.key, hw.fingerprint)
        if key not in self._bounds:
            self._bounds[key] = lowering_for(w).bound(w, hw)
        return self._bounds[key]

    def _op_rows(self, graph: OpGraph, hw: Hardware, schedules: dict[str, Schedule]
                 ) -> tuple[OpFigures, ...]:
        """One row per distinct workload, in graph order, its kernel (as the compiler builds
        it for the node's schedule) simulated alone."""
        groups: dict[str, list] = {}
        for n in graph:
            groups.setdefault(n.workload.key, []).append(n)
        rows = []
        for key, nodes in groups.items():
            w, s = nodes[0].workload, schedules[nodes[0].name]
            if len({schedules[n.name].key for n in nodes}) != 1:
                raise InternalError(f"{key}: one workload compiled with several schedules")
            memo = (key, s.key, hw.fingerprint)
            if memo not in self._ops:
                res = simulate(compile_mod._build(w, s, hw).program, hw)
                self._ops[memo] = (res.latency_ns, res.energy_pj)
            lat, energy = self._ops[memo]
            roles = tuple(dict.fromkeys(n.role for n in nodes))
            rows.append(OpFigures(key, roles, len(nodes), lat, energy, self._bound(w, hw),
                                  s.key))
        return tuple(rows)

    # -- library kernels and searches -------------------------------------------------

    def _kernel(self, case: KernelCase) -> CaseResult:
        runs = [gemv_figures(case.hw, case.n, case.k, case.batch) for _ in range(self.repeats)]
        if len({(r["latency_ns"], r["energy_pj"]) for r in runs}) != 1:
            raise InternalError(f"{case.id}: identical runs simulated differently")
        r = runs[0]
        figures = {"latency_ns": r["latency_ns"], "energy_pj": r["energy_pj"],
                   "bound_ns": r["bound_ns"], "baseline_ns": r["baseline_ns"]}
        info = {"latency_over_bound": r["latency_ns"] / r["bound_ns"], "speedup": r["speedup"]}
        wall = {"simulate_s": statistics.median(float(x["sim_wall_s"]) for x in runs)}
        return CaseResult(case.id, "kernel", figures, (), wall, info)

    def _tune(self, case: TuneCase) -> CaseResult:
        from autosched.database import open_database
        from autosched.measure import LocalRunner
        from autosched.search import SearchContext, tune_tasks

        hw = load_hardware(case.hw)
        graph = model_graph(resolve_model(case.model))[1]
        nodes = graph.by_role(case.role)
        if not nodes:
            raise AutoschedError(f"{case.id}: {case.model} has no operator with role "
                                 f"{case.role!r}")

        def search(folder: str) -> list:
            with LocalRunner(1) as runner:
                return tune_tasks([(nodes[0].workload, 1)], SearchContext.of(
                    hardware=hw, database=open_database(Path(folder) / "tune.db"),
                    runner=runner, trials=case.trials, seed=case.seed,
                    cost_model=_cost_model(case.cost_model, case.seed)))

        walls, best = [], []
        for _ in range(self.repeats):
            with tempfile.TemporaryDirectory() as d:
                res, t = _timed(lambda d=d: search(d))
            walls.append(t)
            best.append(res[0].best.latency_ns if res[0].best is not None else float("nan"))
        return CaseResult(case.id, "tune", {}, (), {"tune_s": statistics.median(walls)},
                          {"best_ns": min(best)})


def _cost_model(kind: str, seed: int) -> object | None:
    if kind == "none":
        return None
    from cost_models.registry import make_cost_model

    return make_cost_model(kind, seed=seed)


def run_case(case: Case, *, repeats: int = 1) -> CaseResult:
    """Measure one case with a fresh :class:`Runner` (what the benchmark scripts call)."""
    return Runner(repeats=repeats).run(case)
