"""Whole-model compilation: graph -> a schedule per node -> kernels -> one linked program.

Every node's output lives in a global host buffer named after the node. At one row
(decode, batch 1) producers that feed a concatenation write straight into windows of a
shared buffer and consumers read windows of their producer; with several rows, host
glue kernels copy instead. Schedules come from the database (exact, nearest, default:
``autosched.lookup``), from an explicit per-node mapping, or, for the plain-memory
baseline, from forcing every family's host placement.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np

from autosched.codegen import Fragment, Linked, link
from autosched.codegen.lowering import build, lowering_for
from autosched.database import Database, open_database
from autosched.frontend import LlamaModel, ModelConfig, OpGraph, OpNode
from autosched.lookup import LookupResult, lookup
from search_spaces import Schedule, Workload
from sim.hardware import Hardware
from sim.hwio import load_hardware
from sim.kernels import Kernel

from .glue import concat_rows, slice_cols
from .graph import model_graph
from .weights import node_constants, node_weights

__all__ = ["CompiledModel", "compile_model", "host_schedule"]


@dataclass
class CompiledModel:
    """The linked program of one model step and how to feed it."""

    cfg: ModelConfig
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

    def place(self, mem: object, model: LlamaModel) -> None:
        """Write every node's weights into the banks of ``mem``."""
        self.linked.place(mem, {n.name: node_weights(model, n) for n in self.graph})

    def inputs(self, model: LlamaModel, ids: np.ndarray, positions: np.ndarray) -> dict:
        """Host inputs of one step: token ``ids`` [batch, tokens] at ``positions`` [tokens]."""
        pos = np.tile(np.asarray(positions), self.graph.batch)
        out = {"ids": np.asarray(ids, dtype=np.float32).reshape(-1)}
        for n in self.graph:
            for name, value in node_constants(model, self.cfg, n, pos).items():
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


@lru_cache(maxsize=4096)
def _build(w: Workload, s: Schedule, hw: Hardware) -> Kernel:
    """Lowering is deterministic: each (workload, schedule, hardware) is built once."""
    return build(w, s, hw)


class _Builder:
    """Per-compilation state: schedule choices, kernel cache, fragments in order."""

    def __init__(self, graph: OpGraph, hw: Hardware, db: Database | None,
                 schedules: dict[str, Schedule] | None, placement: str | None) -> None:
        self.graph, self.hw, self.db = graph, hw, db
        self.schedules, self.placement = schedules or {}, placement
        self.choices: dict[str, LookupResult] = {}
        self.kernels: dict[str, Kernel] = {}
        self.frags: list[Fragment] = []
        self._looked: dict[str, LookupResult] = {}
        self.one_row = graph.batch * graph.tokens == 1
        self.homes = self._homes()
        self.width: dict[str, int] = {}

    def _homes(self) -> dict[str, tuple[str, int]]:
        """At one row, the inputs of a concatenating node live side by side in one buffer."""
        homes: dict[str, tuple[str, int]] = {}
        if not self.one_row:
            return homes
        for n in self.graph:
            if n.workload.op == "rope" and len(n.inputs) > 1:
                off = 0
                for src in n.inputs:
                    homes[src] = (f"{n.name}.in", off)
                    off += _out_width(self.graph.node(src).workload)
        return homes

    def choose(self, n: OpNode) -> LookupResult:
        w = n.workload
        if n.name in self.schedules:
            return LookupResult("given", w, self.schedules[n.name])
        if self.placement == "host":
            return LookupResult("baseline", w, host_schedule(w, self.hw))
        if w.key not in self._looked:
            self._looked[w.key] = lookup(self.db, w, self.hw)
        return self._looked[w.key]

    def kernel(self, w: Workload, s: Schedule) -> Kernel:
        return _build(w, s, self.hw)

    def home(self, name: str) -> tuple[str, int]:
        return self.homes.get(name, (name, 0))

    def source(self, name: str, start: int = 0, stop: int | None = None) -> tuple[str, int]:
        """Where columns ``start:stop`` of node ``name``'s output can be read."""
        width = self.width[name]
        stop = width if stop is None else stop
        glob, off = self.home(name)
        if self.one_row or (start == 0 and stop == width):
            return glob, off + start
        tag = f"{name}.cols{start}_{stop}"
        k = slice_cols(self.graph.batch * self.graph.tokens, width, start, stop)
        self.frags.append(Fragment(tag, k, (("x", glob, off), ("y", tag))))
        return tag, 0

    def concat(self, n: OpNode) -> tuple[str, int]:
        """The concatenation of ``n``'s inputs, per row."""
        if self.one_row:
            return f"{n.name}.in", 0
        widths = tuple(self.width[s] for s in n.inputs)
        tag = f"{n.name}.in"
        k = concat_rows(self.graph.batch * self.graph.tokens, widths)
        binds = [(f"p{i}", *self.home(s)) for i, s in enumerate(n.inputs)]
        self.frags.append(Fragment(tag, k, (*binds, ("y", tag))))
        return tag, 0

    def add(self, n: OpNode) -> None:
        res = self.choose(n)
        self.choices[n.name] = res
        k = self.kernel(n.workload, res.schedule)
        self.kernels[n.name] = k
        binds = [(k.output, *self.home(n.name))] + self._inputs(n, k)
        self.frags.append(Fragment(n.name, k, tuple(binds)))
        self.width[n.name] = int(k.output_shape[-1]) if n.workload.op != "rope" else \
            int(np.prod(k.output_shape[-2:]))

    def _inputs(self, n: OpNode, k: Kernel) -> list[tuple]:
        w, ins = n.workload, n.inputs
        if w.op == "embedding":
            return [("ids", "ids", 0)]
        if w.op == "rope":
            src = self.concat(n) if len(ins) > 1 else self.source(ins[0])
            return [("x", *src)]
        if w.op == "attention":
            d = w.dims
            qw, kw = d["h"] * d["d"], d["kvh"] * d["d"]
            if len(ins) == 2:  # (rope of q|k, v)
                return [("q", *self.source(ins[0], 0, qw)),
                        ("k", *self.source(ins[0], qw, qw + kw)), ("v", *self.source(ins[1]))]
            return [(name, *self.source(s)) for name, s in zip(("q", "k", "v"), ins, strict=True)]
        acts = [x for x in k.inputs if x not in _CONSTANTS]
        return [(local, *self.source(src)) for local, src in zip(acts, ins, strict=False)]


_CONSTANTS = {"w", "b", "norm_w", "cos", "sin", "table"}


def _out_width(w: Workload) -> int:
    d = w.dims
    if w.op in ("gemv", "gemm"):
        return d["n"] // 2 if w.attr("epilogue") == "silu_mul" else d["n"]
    if w.op == "rope":
        return d["h"] * d["d"]
    if w.op == "attention":
        return d["h"] * d["d"]
    return d.get("n", 1)


def compile_model(model: str | ModelConfig, hw: str | Hardware, *,
                  db: str | Path | Database | None = None, phase: str = "decode",
                  batch: int = 1, context: int | None = None, capacity: int | None = None,
                  fusion: dict | None = None, schedules: dict[str, Schedule] | None = None,
                  placement: str | None = None, graph: OpGraph | None = None) -> CompiledModel:
    """Compile one step of ``model`` for ``hw`` into a single program."""
    hw = load_hardware(hw)
    database = open_database(db) if db is not None else None
    if graph is None:
        cfg, graph = model_graph(model, phase=phase, batch=batch, context=context,
                                 capacity=capacity, fusion=fusion)
    else:
        cfg = model if isinstance(model, ModelConfig) else model_graph(model)[0]
    b = _Builder(graph, hw, database, schedules, placement)
    for n in graph:
        b.add(n)
    linked = link(b.frags, hw, name=f"{cfg.name}_{graph.phase}")
    logits = next((n.name for n in graph if n.role == "lm_head"), graph.nodes[-1].name)
    token = next((n.name for n in graph if n.role == "argmax"), logits)
    return CompiledModel(cfg, graph, hw, linked, b.choices, b.kernels, b.home(logits)[0],
                         b.home(token)[0])
