"""The one runner behind the regression suite and the ``experiments/bench_*`` tables.

:class:`Runner` measures a case (:mod:`.cases`) into a :class:`CaseResult`. Every
case is timed ``repeats`` times and its wall-clock figures are the medians; the simulated
figures of every repeat must agree exactly (the simulator is deterministic; a repeat that
differs is an internal error). A case that cannot be measured becomes a result with its
error message (a model step keeps its operators' figures when each kernel builds alone,
e.g. when the whole program's weights do not fit the device) and the run goes on.

Model cases: ``compile_s`` is ``compile_step`` on the already captured graph with the
kernel cache emptied first (lowering, validation, linking; the torch capture is not
part of it), ``simulate_s`` the cycle-level simulation of the system program. A case on
one device is the step on the system of one; a case on a system of several devices is
the step under the partition ``autosched simulate`` would choose (:mod:`.systems`).
The gated bound of a one-device case is the sum over nodes of each family's bound, of a
partitioned one the partition's bound, as each was recorded.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import replace
from functools import partial
from pathlib import Path

import autosched.compiler.builder as builder_mod
from autosched.compiler import compile_step, library_choice, pin_graph, plain_memory_ns
from autosched.families import family_of
from autosched.ir import OpGraph, Step
from autosched.lookup import lookup
from autosched.pipeline import model_graph
from search_spaces import Schedule, Workload
from search_spaces.fusion import FULL_FUSION
from sim.errors import AutoschedError, CapacityError, InternalError
from sim.figures import gemv_figures
from sim.hardware import Hardware
from sim.hwio import LIMITS, load_hardware
from sim.system import load_system
from sim.timing import simulate, simulate_system

from .cases import Case, KernelCase, ModelCase, TuneCase, case_kind, resolve_model
from .results import CaseResult, OpFigures
from .sources import ScheduleSource
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

    def _schedules(self, case: ModelCase, compiled: OpGraph, hw: Hardware
                   ) -> dict[str, Schedule] | str | None:
        """What ``compile_step(schedules=...)`` gets for the ``compiled`` graph: the tuned
        source's choices, the library kernels, or None (each family's default)."""
        if case.schedules == "tuned":
            return {k: c.schedule for k, c in self.tuned().choices(compiled, hw).items()}
        return "library" if case.schedules == "library" else None

    def _step(self, case: ModelCase) -> tuple[Step, Hardware, OpGraph, OpGraph]:
        """(step, hardware, its graph, the graph as compiled): a tuned case's weights
        where its source's one-row schedules keep them, any other case's where the
        one-row defaults do (``ScheduleSource.pinned``); the same nodes by name."""
        cfg, hw = case.config(), load_hardware(case.hw)
        fusion = dict(FULL_FUSION) if case.fusion == "full" else {}
        step = Step(cfg, case.phase, case.batch, case.context)
        graph = model_graph(cfg, fusion=fusion, phase=case.phase, batch=case.batch,
                            context=case.context)[1]
        compiled = self.tuned().pinned(graph, hw) if case.schedules == "tuned" else \
            pin_graph(graph, hw, None)
        return step, hw, graph, compiled

    def kernels_alone(self, case: ModelCase) -> tuple[OpFigures, ...]:
        """Per distinct operator of the step, its kernel built and simulated alone, without
        linking the program (the same rows a measured case carries)."""
        _, hw, graph, compiled = self._step(case)
        schedules = self._schedules(case, compiled, hw)
        if not isinstance(schedules, dict):
            choose = library_choice if schedules == "library" else partial(lookup, None)
            schedules = {n.name: choose(n.workload, hw).schedule for n in compiled}
        return self._op_rows(graph, compiled, hw, schedules)

    def _model(self, case: ModelCase) -> CaseResult:
        if load_system(case.hw).devices > 1:
            return self._partitioned(case)
        step, hw, graph, compiled = self._step(case)
        schedules = self._schedules(case, compiled, hw)
        compile_s, simulate_s, seen = [], [], set()
        info: dict[str, float] = {}
        if case.grow:
            hw = self._grown(step, hw, compiled, schedules)
            if hw.org.rows_per_bank != load_hardware(case.hw).org.rows_per_bank:
                info["rows_per_bank"] = hw.org.rows_per_bank
        system = load_system(hw)
        for _ in range(self.repeats):
            builder_mod._build.cache_clear()  # lower every kernel again: the cold compile
            cm, t = _timed(lambda: compile_step(step, system, graph=compiled,
                                                schedules=schedules))
            res, ts = _timed(lambda cm=cm: simulate_system(cm.program, system))
            compile_s.append(t)
            simulate_s.append(ts)
            seen.add((res.latency_ns, res.energy_pj))
        if len(seen) != 1:
            raise InternalError(f"{case.id}: {len(seen)} different simulated results over "
                                f"{self.repeats} identical runs: {sorted(seen)}")
        ops = self._op_rows(graph, compiled, hw,
                            {k: c.schedule for k, c in cm.choices.items()})
        bound = sum(self._bound(n.workload, hw) for n in compiled)
        figures = {"latency_ns": res.latency_ns, "energy_pj": res.energy_pj,
                   "bound_ns": bound}
        tokens = graph.batch * graph.tokens
        info.update({"tokens_per_s": tokens / (res.latency_ns * 1e-9),
                     "latency_over_bound": res.latency_ns / bound})
        if case.baseline:
            figures["baseline_ns"] = plain_memory_ns(step, system)
            info["speedup_vs_baseline"] = figures["baseline_ns"] / res.latency_ns
        wall = {"compile_s": statistics.median(compile_s),
                "simulate_s": statistics.median(simulate_s)}
        return CaseResult(case.id, "model", figures, ops, wall, info)

    def _partitioned(self, case: ModelCase) -> CaseResult:
        """A step on a system of several devices, partitioned as ``autosched simulate``
        chooses: its gated figures are latency, energy and the partition's bound; the
        partition and the communication share are information. Per-operator rows are not
        taken (an operator is split across devices)."""
        from autosched.compiler import simulate_step

        if case.schedules != "default":
            raise AutoschedError(f"{case.id}: a case on several devices takes the default "
                                 f"schedules, not {case.schedules!r}")
        fusion = dict(FULL_FUSION) if case.fusion == "full" else {}
        system = load_system(case.hw)
        step = Step(case.config(), case.phase, case.batch, case.context)
        runs = [simulate_step(step, system, fusion=fusion, baseline=False, ops=False)
                for _ in range(self.repeats)]
        seen = {(f.latency_ns, f.energy_pj) for f in runs}
        if len(seen) != 1:
            raise InternalError(f"{case.id}: {len(seen)} different simulated results over "
                                f"{self.repeats} identical runs: {sorted(seen)}")
        f = runs[0]
        figures = {"latency_ns": f.latency_ns, "energy_pj": f.energy_pj, "bound_ns": f.bound_ns}
        info = {"tokens_per_s": f.tokens_per_s, "latency_over_bound": f.latency_ns / f.bound_ns,
                "comm_share": f.comm_share, "tp": float(f.partition.get("tp", 1)),
                "pp": float(f.partition.get("pp", 1))}
        wall = {"simulate_s": statistics.median(r.sim_wall_s for r in runs)}
        return CaseResult(case.id, "model", figures, (), wall, info)

    @staticmethod
    def _grown(step: Step, hw: Hardware, graph: OpGraph,
               schedules: dict[str, Schedule] | str | None) -> Hardware:
        """``hw``, or ``hw`` with the rows per bank (a power of two) the step's program
        needs when it does not fit (``ModelCase.grow``); every timing is unchanged."""
        try:
            compile_step(step, load_system(hw), graph=graph, schedules=schedules)
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
            self._bounds[key] = family_of(w).bound(w, hw)
        return self._bounds[key]

    def _op_rows(self, graph: OpGraph, compiled: OpGraph, hw: Hardware,
                 schedules: dict[str, Schedule]) -> tuple[OpFigures, ...]:
        """One row per distinct workload of ``graph``, in graph order, its kernel (as the
        compiler builds it for the node's schedule, on the node's workload in
        ``compiled``) simulated alone. Rows are keyed by ``graph``'s workloads, so the
        cases of one step compare by operator wherever each keeps its weights."""
        groups: dict[str, list] = {}
        for n in graph:
            groups.setdefault(n.workload.key, []).append(n)
        rows = []
        for key, nodes in groups.items():
            w, s = compiled.node(nodes[0].name).workload, schedules[nodes[0].name]
            if len({schedules[n.name].key for n in nodes}) != 1:
                raise InternalError(f"{key}: one workload compiled with several schedules")
            memo = (w.key, s.key, hw.fingerprint)
            if memo not in self._ops:
                res = simulate(builder_mod._build(w, s, hw).program, hw)
                self._ops[memo] = (res.latency_ns, res.energy_pj)
            lat, energy = self._ops[memo]
            roles = tuple(dict.fromkeys(n.role for n in nodes))
            rows.append(OpFigures(key, roles, len(nodes), lat, energy, self._bound(w, hw),
                                  s.key))
        return tuple(rows)

    # -- library kernels and searches -------------------------------------------------

    def _kernel(self, case: KernelCase) -> CaseResult:
        hw = load_hardware(case.hw)
        runs = [gemv_figures(hw, case.n, case.k, case.batch) for _ in range(self.repeats)]
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
