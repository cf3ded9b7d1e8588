"""Whole-model compilation: graph -> a schedule per node -> kernels -> one linked program.

Every node's output lives in a global host buffer named after the node. At one row
(decode, batch 1) producers that feed a concatenation write straight into windows of a
shared buffer and consumers read windows of their producer; with several rows, host
glue kernels copy instead. Schedules come from the database (exact, nearest, default:
``autosched.lookup``), from an explicit per-node mapping, from the shipped library
kernels (``schedules="library"``: each family's ``library`` point, its default where the
library has no kernel), or, for the plain-memory baseline, from forcing every family's
host placement.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np

from autosched.codegen import Fragment, Linked, link
from autosched.codegen.registry import build, lowering_for, space_of
from autosched.database import Database, open_database
from autosched.frontend import (
    ModelConfig,
    OpGraph,
    OpNode,
    get_model_config,
    model_graph,
)
from autosched.frontend.checkpoint import Weights
from autosched.fusion import TOKEN_IDS, FusedView, operands, output_width
from autosched.lookup import LookupResult, lookup
from search_spaces import Schedule, Workload
from sim.errors import AutoschedError, InternalError, ProgramError
from sim.hardware import Hardware
from sim.hwio import load_hardware
from sim.kernels import Kernel
from sim.validate import validate

from .glue import gather
from .weights import node_constants, node_weights

__all__ = ["CompiledModel", "compile_model", "host_schedule", "library_choice", "plan_key"]


@dataclass
class CompiledModel:
    """The linked program of one model step and how to feed it."""

    cfg: ModelConfig | None
    graph: OpGraph
    hw: Hardware
    linked: Linked
    choices: dict[str, LookupResult]
    kernels: dict[str, Kernel]
    logits: str
    token: str
    rows: int = field(init=False)

    def __post_init__(self) -> None:
        self.rows = self.graph.batch * self.graph.tokens

    @property
    def program(self):
        return self.linked.program

    def place(self, mem: object, weights: Weights) -> None:
        """Write every node's weights into the banks of ``mem``."""
        self.linked.place(mem, {n.name: node_weights(weights, n) for n in self.graph})

    def inputs(self, weights: Weights, ids: np.ndarray, positions: np.ndarray) -> dict:
        """Host inputs of one step: token ``ids`` [batch, tokens] at ``positions`` [tokens]."""
        pos = np.tile(np.asarray(positions), self.graph.batch)
        out = {"ids": np.asarray(ids, dtype=np.float32).reshape(-1)}
        for n in self.graph:
            for name, value in node_constants(weights, n, pos).items():
                out[f"{n.name}.{name}"] = value
        return self.linked.bind(out)

    def lookup_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for r in self.choices.values():
            counts[r.kind] = counts.get(r.kind, 0) + 1
        return counts


def host_schedule(workload: Workload, hw: Hardware) -> Schedule:
    """The family's host placement (the plain-memory path) where it has one, else default."""
    low = lowering_for(workload)
    space = low.space(workload, hw)
    default = low.default(workload, hw)
    names = {p.name for p in space.params}
    if "placement" not in names or not space.param("placement").domain.contains("host"):
        return Schedule.of(space, default)

    def choose(p):
        if p.name == "placement":
            return "host"
        return default[p.name] if p.name in default else p.domain.values()[0]

    return Schedule.of(space, space.fill(choose))


def library_choice(workload: Workload, hw: Hardware) -> LookupResult:
    """The shipped library kernel's point (kind ``library``) where the library has a kernel
    for ``workload``, else the family's default (kind ``default``)."""
    low = lowering_for(workload)
    space = space_of(workload, hw)
    lib = low.library(workload, hw)
    if lib is None:
        return LookupResult("default", workload, Schedule.of(space, low.default(workload, hw)))
    return LookupResult("library", workload, Schedule.of(space, lib))


@lru_cache(maxsize=4096)
def _build(w: Workload, s: Schedule, hw: Hardware) -> Kernel:
    """Lowering is deterministic: each (workload, schedule, hardware) is built once."""
    return build(w, s, hw)


class _Builder:
    """Per-compilation state: schedule choices, kernel cache, fragments in order."""

    def __init__(self, graph: OpGraph, hw: Hardware, db: Database | None,
                 schedules: dict[str, Schedule] | str | None, placement: str | None) -> None:
        self.graph, self.hw, self.db = graph, hw, db
        self.library = schedules == "library"
        if isinstance(schedules, str) and not self.library:
            raise AutoschedError(f"schedules {schedules!r}: give a node -> schedule mapping "
                                 "or 'library'")
        self.schedules = {} if self.library else schedules or {}
        self.placement = placement
        self.choices: dict[str, LookupResult] = {}
        self.kernels: dict[str, Kernel] = {}
        self.frags: list[Fragment] = []
        self._looked: dict[str, LookupResult] = {}
        self.one_row = graph.batch * graph.tokens == 1
        self.homes = self._homes()

    def _homes(self) -> dict[str, tuple[str, int]]:
        """At one row, sources concatenated whole by a consumer live side by side."""
        homes: dict[str, tuple[str, int]] = {}
        if not self.one_row:
            return homes
        for n in self.graph:
            for name, views in operands(self.graph, n).items():
                if len(views) < 2 or any(v.source in homes for v in views):
                    continue
                if all(v.lo == 0 and v.hi == output_width(self.graph.node(v.source).workload)
                       for v in views):
                    off = 0
                    for v in views:
                        homes[v.source] = (f"{n.name}.{name}", off)
                        off += v.hi
        return homes

    def choose(self, n: OpNode) -> LookupResult:
        w = n.workload
        if n.name in self.schedules:
            return LookupResult("given", w, self.schedules[n.name])
        if self.placement == "host":
            return LookupResult("baseline", w, host_schedule(w, self.hw))
        if w.key not in self._looked:
            self._looked[w.key] = library_choice(w, self.hw) if self.library \
                else lookup(self.db, w, self.hw)
        return self._looked[w.key]

    def kernel(self, w: Workload, s: Schedule) -> Kernel:
        return _build(w, s, self.hw)

    def home(self, name: str) -> tuple[str, int]:
        return self.homes.get(name, (name, 0))

    def source(self, n: OpNode, local: str, views: tuple[FusedView, ...]) -> tuple[str, int]:
        """Where the kernel input ``local`` of ``n`` (the concatenation of ``views``) lives."""
        g = self.graph
        if views[0].source == TOKEN_IDS:
            return TOKEN_IDS, 0
        first = self.home(views[0].source)
        widths = [output_width(g.node(v.source).workload) for v in views]
        if not any(v.last for v in views):
            if len(views) == 1 and (self.one_row or widths[0] == views[0].hi - views[0].lo):
                return first[0], first[1] + views[0].lo
            if self.one_row and all(self.home(v.source) == (first[0], first[1] + sum(
                    widths[:i])) for i, v in enumerate(views)):
                return first  # producers already write side by side
        rows = g.batch * g.tokens
        last = views[0].last
        tag = f"{n.name}.{local}"
        k = gather(g.batch if last else rows, rows,
                   tuple((wd, v.lo, v.hi) for wd, v in zip(widths, views, strict=True)),
                   stride=g.tokens if last else 1, offset=g.tokens - 1 if last else 0)
        binds = [(f"p{i}", *self.home(v.source)) for i, v in enumerate(views)]
        self.frags.append(Fragment(tag, k, (*binds, ("y", tag))))
        return tag, 0

    def add(self, n: OpNode) -> None:
        res = self.choose(n)
        self.choices[n.name] = res
        k = self.kernel(n.workload, res.schedule)
        self.kernels[n.name] = k
        binds = [(k.output, *self.home(n.name))] + self._inputs(n, k)
        self.frags.append(Fragment(n.name, k, tuple(binds)))

    def _inputs(self, n: OpNode, k: Kernel) -> list[tuple]:
        return [(local, *self.source(n, local, views))
                for local, views in operands(self.graph, n).items()]


def plan_key(model: str, phase: str, batch: int) -> str:
    """Where ``tune --fusion auto`` records the plan it chose for a model step."""
    return f"{model}:{phase}:b{batch}"


def compile_model(model: str | ModelConfig | None, hw: str | Hardware, *,
                  db: str | Path | Database | None = None, phase: str = "decode",
                  batch: int = 1, context: int | None = None, capacity: int | None = None,
                  fusion: dict | None = None,
                  schedules: dict[str, Schedule] | str | None = None,
                  placement: str | None = None, graph: OpGraph | None = None) -> CompiledModel:
    """Compile one step of ``model`` for ``hw`` into a single program.

    ``fusion``: a plan (``{}`` for none); None means the plan ``tune`` stored in ``db``
    for this model step, or none. ``model`` may be None when ``graph`` is given (the
    torch.compile backend's graphs have no config); ``CompiledModel.cfg`` is then None.
    ``schedules``: node name -> schedule (others looked up), or ``"library"`` for the
    shipped library kernels everywhere (see the module docstring).
    """
    hw = load_hardware(hw)
    database = open_database(db) if db is not None else None
    cfg = get_model_config(model) if model is not None or graph is None else None
    if fusion is None and database is not None and graph is None:
        fusion = database.plan(plan_key(cfg.name, phase, batch), hw.fingerprint)
    if graph is None:
        graph = model_graph(cfg, phase=phase, batch=batch, context=context, capacity=capacity,
                            fusion=fusion)[1]
    name = cfg.name if cfg is not None else graph.model
    b = _Builder(graph, hw, database, schedules, placement)
    for n in graph:
        b.add(n)
    linked = link(b.frags, hw, name=f"{name}_{graph.phase}")
    try:  # every kernel was validated by build(); what is left to break is the linking
        validate(linked.program, hw)
    except ProgramError as e:
        raise InternalError(f"internal compiler error: linking {name} {graph.phase} on "
                            f"{hw.name} produced an invalid program: {e}") from e
    logits = next((n.name for n in graph if n.role == "lm_head"), graph.nodes[-1].name)
    token = next((n.name for n in graph if n.role == "argmax"), logits)
    return CompiledModel(cfg, graph, hw, linked, b.choices, b.kernels, b.home(logits)[0],
                         b.home(token)[0])
