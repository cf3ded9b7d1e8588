"""The compiler-versus-hand-kernel hand-off, with figures.

For one model step, the shared runner compiles and simulates four programs: every
operator on the shipped library kernel where the library has one (the hand-kernel
baseline; other families keep their default), on each family's default, on the tuned
schedules, and the tuned schedules under the full fusion plan. Per distinct operator of
the unfused step (its kernel simulated alone): the library kernel's latency, the
default's, the tuned schedule's, the bound, which one the tuned program uses, and why.
The tuner measures each family's library point first, so a tuned operator is never
slower than the library kernel; an operator whose schedule was not tuned may be, and is
reported.

The library kernels lay weights out less densely than the compiler's schedules: where
the library program does not fit the preset, it is linked and timed on the same device
with the rows per bank its layout needs (``ModelCase.grow``; every timing unchanged, the
result's ``info`` names the rows), so the two programs are compared end to end. The step
is also compared by its kernels alone, each weighted by how often the step runs it
(:attr:`Handoff.kernel_speedup`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from autosched.families import family_of
from autosched.ir import OpGraph
from autosched.lookup import LookupResult
from autosched.pipeline import model_graph
from sim.errors import AutoschedError
from sim.hardware import Hardware
from sim.hwio import load_hardware

from .cases import ModelCase
from .results import CaseResult
from .runner import Runner
from .sources import ScheduleSource

__all__ = ["Handoff", "OpHandoff", "assemble", "compare_ops", "handoff", "handoff_cases",
           "tuned_choices"]


@dataclass(frozen=True)
class OpHandoff:
    """One distinct operator: library, default and tuned latency alone (ns), its bound,
    how its tuned schedule was found, what the tuned program uses and why."""

    workload: str
    roles: tuple[str, ...]
    count: int
    library_ns: float | None  # None: the library has no kernel for it
    default_ns: float
    tuned_ns: float
    bound_ns: float
    found: str
    uses: str
    why: str


def kernels_ns(result: CaseResult) -> float:
    """Sum over the distinct operators of a step of count x latency of the kernel alone."""
    return sum(o.count * o.latency_ns for o in result.ops)


@dataclass(frozen=True)
class Handoff:
    """The four programs of one step and the per-operator comparison. ``library`` carries
    an error (and its operators alone) when the library program cannot be linked."""

    case: str
    library: CaseResult
    default: CaseResult
    tuned: CaseResult
    fused: CaseResult
    ops: tuple[OpHandoff, ...]

    @property
    def speedup(self) -> float | None:
        """Library-kernel program latency over the tuned program's (unfused); None when
        the library program cannot be measured."""
        if not self.library.ok:
            return None
        return self.library.figures["latency_ns"] / self.tuned.figures["latency_ns"]

    @property
    def kernel_speedup(self) -> float:
        """The step on the library kernels over the step on the tuned ones, each the sum of
        count x kernel alone (unfused; defined whether or not the programs link)."""
        return kernels_ns(self.library) / kernels_ns(self.tuned)

    def slower_ops(self) -> list[OpHandoff]:
        """Operators on which the tuned program loses to the library kernel."""
        return [o for o in self.ops if o.library_ns is not None and o.tuned_ns > o.library_ns]

    def to_dict(self) -> dict:
        ends = {k: getattr(self, k).figures.get("latency_ns")
                for k in ("library", "default", "tuned", "fused")}
        return {"case": self.case, "latency_ns": ends,
                "library_error": self.library.error or None,
                "kernels_ns": {"library": kernels_ns(self.library),
                               "tuned": kernels_ns(self.tuned)},
                "bound_ns": self.tuned.figures.get("bound_ns"), "speedup": self.speedup,
                "kernel_speedup": self.kernel_speedup,
                "slower_ops": len(self.slower_ops()), "ops": [asdict(o) for o in self.ops]}


def _why(o: dict, family: str) -> tuple[str, str]:
    """(uses, why) of one operator."""
    lib, tuned = o["library_ns"], o["tuned_ns"]
    uses = "library" if o["tuned_key"] == o["library_key"] and lib is not None else \
        "default" if o["tuned_key"] == o["default_key"] else "tuned"
    if lib is None:
        return uses, f"no library kernel for {family} on this device"
    if uses == "library":
        return uses, ("the library kernel is the fastest schedule measured"
                      if o["found"] == "exact" else f"the {o['found']} schedule is the library's")
    if tuned < lib:
        return uses, f"{lib / tuned:.2f}x faster than the library kernel"
    if tuned == lib:
        return uses, "as fast as the library kernel"
    return uses, (f"the library kernel is {tuned / lib:.2f}x faster: the {o['found']} "
                  "schedule was never measured against it; tune this workload")


def compare_ops(graph: OpGraph, hw: Hardware, library: CaseResult, default: CaseResult,
                tuned: CaseResult, found: dict[str, str]) -> tuple[OpHandoff, ...]:
    """Per distinct operator of ``graph`` (unfused), from the three programs' op rows;
    ``found`` maps workload key -> how its tuned schedule was found."""
    out = []
    for t in tuned.ops:
        w = next(n.workload for n in graph if n.workload.key == t.workload)
        lib, dflt = library.op(t.workload), default.op(t.workload)
        has_lib = family_of(w).library(w, hw) is not None
        row = {"library_ns": lib.latency_ns if has_lib else None, "tuned_ns": t.latency_ns,
               "tuned_key": t.schedule, "library_key": lib.schedule,
               "default_key": dflt.schedule, "found": found.get(t.workload, "given")}
        fn = w.attr("fn", "")
        uses, why = _why(row, f"{w.op} {fn}" if fn else w.op)
        out.append(OpHandoff(t.workload, t.roles, t.count, row["library_ns"], dflt.latency_ns,
                             t.latency_ns, t.bound_ns, row["found"], uses, why))
    return tuple(out)


def handoff_cases(model: str, hw: str, *, phase: str = "decode", batch: int = 1,
                  context: int = 128, quantize: str | None = None) -> dict[str, ModelCase]:
    """The four programs compared: library, default, tuned, tuned with full fusion (each
    of the model quantized to ``quantize`` when given)."""
    step = dict(phase=phase, batch=batch, context=context, quantize=quantize)
    return {"library": ModelCase(model, hw, schedules="library", grow=True, **step),
            "default": ModelCase(model, hw, **step),
            "tuned": ModelCase(model, hw, schedules="tuned", **step),
            "fused": ModelCase(model, hw, schedules="tuned", fusion="full", **step)}


def assemble(cases: dict[str, ModelCase], results: dict[str, CaseResult],
             found: dict[str, str]) -> Handoff:
    """The hand-off of measured (or baseline) ``results`` of :func:`handoff_cases`.

    Raises the error of a program that could not be measured, except the library
    program's when its operators were measured alone.
    """
    for k, r in results.items():
        if not r.ok and not (k == "library" and r.ops):
            raise AutoschedError(f"{r.case}: {r.error}")
    c = cases["tuned"]
    hw = load_hardware(c.hw)
    graph = model_graph(c.config(), phase=c.phase, batch=c.batch, context=c.context)[1]
    ops = compare_ops(graph, hw, results["library"], results["default"], results["tuned"],
                      found)
    return Handoff(c.id.rsplit("/", 1)[0], results["library"], results["default"],
                   results["tuned"], results["fused"], ops)


def handoff(model: str, hw: str, *, runner: Runner, phase: str = "decode", batch: int = 1,
            context: int = 128, quantize: str | None = None) -> Handoff:
    """Measure the four programs of one step with ``runner`` (its tuned source) and compare
    (the model quantized to ``quantize`` when given).

    Raises the first program's error when one cannot be measured.
    """
    cases = handoff_cases(model, hw, phase=phase, batch=batch, context=context,
                          quantize=quantize)
    results = {k: runner.run(c) for k, c in cases.items()}
    graph = model_graph(cases["tuned"].config(), phase=phase, batch=batch,
                        context=context)[1]
    found = {k: c.kind for k, c in tuned_choices(runner.tuned(), graph,
                                                 load_hardware(hw)).items()}
    return assemble(cases, results, found)


def tuned_choices(source: ScheduleSource, graph: OpGraph, hw: Hardware
                  ) -> dict[str, LookupResult]:
    """Workload key of ``graph`` -> the schedule ``source`` compiles it with, looked up on
    the workload as compiled (``ScheduleSource.pinned``): the hand-off's rows are keyed
    by the operator, a step of several rows compiles it where its weights are kept."""
    choices = source.choices(source.pinned(graph, hw), hw)
    return {n.workload.key: choices[n.name] for n in graph}
