"""Whole-model compilation: graph -> a schedule per node -> kernels -> one linked program.

Every node's output lives in a global host buffer named after the node. At one row
(decode, batch 1) producers that feed a concatenation write straight into windows of a
shared buffer and consumers read windows of their producer; with several rows, host
glue kernels copy instead. Schedules come from the database (exact, nearest, default:
``autosched.lookup``), from an explicit per-node mapping, from the shipped library
kernels (``schedules="library"``: each family's ``library`` point, its default where the
library has no kernel), or, for the plain-memory baseline, from forcing every family's
host placement. Multi-row GEMVs are pinned to their weights' resident layout
(``resident``), so every step reads the weights where they are. The linker plans the
device's memory; when it overflows, denser KV-cache layouts (``kvfit``) and then denser
GEMV layouts (``weightfit``) are chosen, and a step that still does not fit raises
:class:`~sim.errors.CapacityError` with the budget.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
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
from sim.errors import AutoschedError, CapacityError, InternalError, ProgramError
from sim.hardware import Hardware
from sim.hwio import load_hardware
from sim.kernels import Kernel
from sim.validate import validate

from .glue import gather
from .kvfit import compact_schedule
from .placement import PIM_FAMILIES, PLANS, faster_default, placement_key, side_schedule
from .resident import pin_graph
from .weightfit import dense_schedules, repin
from .weights import node_constants, node_weights

__all__ = ["CompiledModel", "compile_model", "library_choice", "plan_key"]


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
    placement: str = "auto"
    rows: int = field(init=False)

    def __post_init__(self) -> None:
        self.rows = self.graph.batch * self.graph.tokens

    @property
    def program(self):
        return self.linked.program

    @property
    def budget(self):
        """The device's memory plan (:class:`~autosched.codegen.memplan.Budget`)."""
        return self.linked.budget

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
                 schedules: dict[str, Schedule] | str | None, placement: str | None,
                 fitted: dict[str, Schedule] | None = None) -> None:
        self.graph, self.hw, self.db = graph, hw, db
        self.fitted = fitted or {}  # denser layouts chosen to fit, over everything else
        self.library = schedules == "library"
        if isinstance(schedules, str) and not self.library:
            raise AutoschedError(f"schedules {schedules!r}: give a node -> schedule mapping "
                                 "or 'library'")
        self.schedules = {} if self.library else schedules or {}
        self.placement = placement
        self.choices: dict[str, LookupResult] = {}
        self.kernels: dict[str, Kernel] = {}
        self.frags: list[Fragment] = []
        self.constants: set[str] = {TOKEN_IDS}
        self._looked: dict[str, LookupResult] = {}
        self.one_row = graph.batch * graph.tokens == 1
        self.homes = self._homes()
        self.alias: dict[str, tuple[str, int]] = {}  # what consumers read instead

    def _homes(self) -> dict[str, tuple[str, int]]:
        """At one row, sources concatenated whole by a consumer live side by side."""
        homes: dict[str, tuple[str, int]] = {}
        if not self.one_row:
            return homes
        for n in self.graph:
            for name, views in operands(self.graph, n).items():
                if len(views) < 2 or any(v.source in homes for v in views):
                    continue
                if all(v.lo == 0 and v.hi == (v.width or output_width(
                        self.graph.node(v.source).workload)) for v in views):
                    off = 0
                    for v in views:
                        homes[v.source] = (f"{n.name}.{name}", off)
                        off += v.hi
        return homes

    def choose(self, n: OpNode) -> LookupResult:
        w = n.workload
        if n.name in self.fitted:
            return LookupResult("fitted", w, self.fitted[n.name])
        if n.name in self.schedules:
            return LookupResult("given", w, self.schedules[n.name])
        if w.key not in self._looked:
            self._looked[w.key] = self._choose(w)
        return self._looked[w.key]

    def _choose(self, w: Workload) -> LookupResult:
        if self.library:
            return library_choice(w, self.hw)
        if self.placement == "host" or (self.placement == "pim" and w.op in PIM_FAMILIES):
            s = side_schedule(w, self.hw, self.placement, self.db)
            if s is not None:
                return LookupResult(self.placement, w, s)
        res = lookup(self.db, w, self.hw)
        # untuned rows of several tokens or sequences: each operator on its faster side
        if res.kind == "default" and (self.graph.phase == "prefill" or self.graph.batch > 1):
            return LookupResult("default", w, faster_default(w, self.hw))
        return res

    def kernel(self, w: Workload, s: Schedule) -> Kernel:
        return _build(w, s, self.hw)

    def out_home(self, name: str) -> tuple[str, int]:
        """Where node ``name`` writes its output."""
        return self.homes.get(name, (name, 0))

    def home(self, name: str) -> tuple[str, int]:
        """Where consumers of node ``name`` read its output."""
        return self.alias.get(name) or self.out_home(name)

    def source(self, n: OpNode, local: str, views: tuple[FusedView, ...]) -> tuple[str, int]:
        """Where the kernel input ``local`` of ``n`` (the concatenation of ``views``) lives."""
        g = self.graph
        if views[0].source == TOKEN_IDS:
            return TOKEN_IDS, 0
        first = self.home(views[0].source)
        widths = [v.width or output_width(g.node(v.source).workload) for v in views]
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
        k = self.kernel(res.workload, res.schedule)
        self.kernels[n.name] = k
        binds = [(k.output, *self.out_home(n.name))] + self._inputs(n, k)
        bound = {b[0] for b in binds}
        self.constants |= {f"{n.name}.{c}" for c in k.inputs if c not in bound}
        self.frags.append(Fragment(n.name, k, tuple(binds)))
        self.after(n)

    def after(self, n: OpNode) -> None:
        """Hook: fragments that follow node ``n`` (collectives of a partitioned model)."""

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
                  placement: str | None = None, graph: OpGraph | None = None,
                  keep_outputs: bool = False) -> CompiledModel:
    """Compile one step of ``model`` for ``hw`` into a single program.

    ``fusion``: a plan (``{}`` for none); None means the plan ``tune`` stored in ``db``
    for this model step, or none. ``model`` may be None when ``graph`` is given (the
    torch.compile backend's graphs have no config); ``CompiledModel.cfg`` is then None.
    ``schedules``: node name -> schedule (others looked up), or ``"library"`` for the
    shipped library kernels everywhere (see the module docstring). ``placement``:
    ``auto`` (every operator's looked-up schedule), ``pim`` or ``host`` (every operator on
    that side, see ``placement``); None means the plan ``choose_plan`` stored in ``db`` for
    this step, or ``auto``. ``keep_outputs``: every node's output stays readable after a
    run (no arena sharing for them), as a caller reading intermediate values needs.
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
    if placement is None and database is not None:
        stored = database.plan(placement_key(name, graph.phase, graph.batch, graph.context),
                               hw.fingerprint)
        placement = (stored or {}).get("placement")
    if placement not in (None, *PLANS):
        raise AutoschedError(f"placement {placement!r} is not one of {', '.join(PLANS)}")
    graph = pin_graph(graph, hw, database)

    def fit(graph: OpGraph) -> CompiledModel:
        """Build and link; when the plan overflows, the KV cache first, then the weights,
        then the cache in the rows the weights freed take denser layouts."""
        fitted: dict[str, Schedule] = {}
        cm = None
        for compact in (None, _compact_kv, dense_schedules, _compact_kv):
            if compact is not None and (cm.budget.fits or not (more := compact(cm))):
                continue
            if compact is not None:
                fitted.update(more)
            b = _Builder(graph, hw, database, schedules, placement, fitted)
            for n in graph:
                b.add(n)
            keep = frozenset(b.home(n.name)[0] for n in graph) if keep_outputs else frozenset()
            cm = link_step(cfg, graph, hw, b, graph.nodes, name=f"{name}_{graph.phase}",
                           keep=keep)
        return cm

    cm = fit(graph)
    if not cm.budget.fits and cfg is not None and graph.batch * graph.tokens > 1:
        # steps of several rows read the weights where batch-1 decode keeps them: when
        # that step fits only through denser layouts, these pin the same ones
        try:
            one = compile_model(cfg, hw, db=database, context=graph.context, fusion=fusion,
                                placement=placement)
        except CapacityError:
            one = None
        if one is not None and (moved := repin(graph, one)) is not None:
            graph = moved
            cm = fit(graph)
    cm.budget.check(f"{name} {graph.phase} batch {graph.batch} context {graph.context} "
                    f"on {hw.name}")
    try:  # every kernel was validated by build(); what is left to break is the linking
        validate(cm.program, hw)
    except ProgramError as e:
        raise InternalError(f"internal compiler error: linking {name} {graph.phase} on "
                            f"{hw.name} produced an invalid program: {e}") from e
    return cm


def link_step(cfg: ModelConfig, graph: OpGraph, hw: Hardware, b: _Builder,
              nodes: tuple[OpNode, ...], *, name: str,
              keep: frozenset[str] = frozenset()) -> CompiledModel:
    """Link the fragments ``b`` built for ``nodes`` (all of ``graph`` or one pipeline
    stage's); ``keep``: further buffers kept whole (sent or received between devices).
    The budget is computed, not checked."""
    roles = {n.role: n.name for n in nodes}
    # the logits: the LM head's, or what the model computes from them (``logits`` role)
    logits, token = roles.get("logits") or roles.get("lm_head", ""), roles.get("argmax", "")
    if logits and not token and any(n.name == logits and n.workload.attr("epilogue") == "argmax"
                                    for n in nodes):
        token = logits  # the LM head's epilogue appends the token as the last column
    outputs = frozenset(b.home(x)[0] for x in (logits, token) if x) | keep
    linked = link(b.frags, hw, name=name, constants=frozenset(b.constants), outputs=outputs)
    linked.budget = replace(linked.budget, weights_data=weight_bytes(nodes, hw),
                            kv_data=kv_bytes(nodes, hw))
    return CompiledModel(cfg, graph, hw, linked, b.choices, b.kernels,
                         b.home(logits)[0] if logits else "", b.home(token)[0] if token else "",
                         b.placement or "auto")


def _compact_kv(cm: CompiledModel) -> dict[str, Schedule]:
    """Schedules giving every attention the fastest layout whose cache fits the rows the
    weights and host buffers leave (``kvfit``); empty when none is compact enough."""
    bd, hw = cm.budget, cm.hw
    attn = [n for n in cm.graph if n.workload.op == "attention" and n.name in cm.choices
            and cm.choices[n.name].kind not in ("given", "fitted")]  # this stage's own
    if not attn:
        return {}
    left = hw.org.rows_per_bank - (bd.weights + bd.host) // bd.row_index
    per = left // len(attn)
    out: dict[str, Schedule] = {}
    found: dict[str, Schedule | None] = {}
    for n in attn:
        w = cm.choices[n.name].workload
        if w.key not in found:
            found[w.key] = compact_schedule(w, hw, per)
        if found[w.key] is None:
            return {}
        out[n.name] = found[w.key]
    return out


def kv_bytes(nodes, hw: Hardware) -> int:
    """Bytes of the keys and values the nodes' attention caches hold (no layout waste)."""
    total = 0
    for n in nodes:
        if n.workload.op == "attention":
            d = n.workload.dims
            cap = int(n.workload.attr("capacity", d["l"]))
            total += 2 * d["b"] * cap * d["kvh"] * d["d"] * hw.elem_bytes
    return total


def weight_bytes(nodes, hw: Hardware) -> int:
    """Bytes of the weight elements the nodes' GEMVs keep in the banks (no padding)."""
    return sum(n.workload.dims["n"] * n.workload.dims["k"] * hw.elem_bytes
               for n in nodes if n.workload.op in ("gemv", "gemm"))
