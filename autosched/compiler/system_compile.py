"""Compiling one model step for a system of several devices.

The step's graph is captured once for the whole model and rewritten into one tensor-
parallel device's share (:func:`~autosched.compiler.partition.shard_graph`). Each pipeline
stage is then compiled like a single-device step from its nodes, plus:

* after each attention output and FFN down projection, an all-reduce of the partial sums
  over the stage's devices, written back in place (one-shot or two-shot, whichever the
  link and host make faster);
* after the LM head, an all-gather of the vocabulary slices (and a reorder by row when
  the step has several rows), which the argmax and the caller read instead;
* a send of every buffer a later stage reads (the residual stream) to the device of the
  same rank there; the receiving stage's host waits for it before anything else.

The result is a :class:`~sim.sysprog.SystemProgram`: one device group per stage.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from autosched.codegen import Fragment
from autosched.database import Database, open_database
from autosched.frontend import ModelConfig, OpGraph, OpNode, get_model_config
from autosched.frontend.checkpoint import Weights
from autosched.fusion import output_width
from search_spaces import Schedule
from search_spaces.fusion import fusion_space, upgrade_plan
from sim.errors import InternalError, ProgramError
from sim.hardware import Hardware, System
from sim.isa import BufRef, HostOp, Send, Signal, Wait, aff
from sim.kernels import Kernel
from sim.kernels.collective import ALGORITHMS, all_gather, all_reduce, collective_ns
from sim.program import Buffer, Program, Stream
from sim.sysprog import Group, SystemProgram, validate_system
from sim.system import load_system

from .compile import PLANS, CompiledModel, _Builder, _compact_kv, link_step
from .partition import REDUCED, Partition, shard_graph, stage_of
from .repeat import stacked_graph
from .resident import pin_graph
from .weights import node_constants, node_weights

__all__ = ["CompiledSystem", "compile_system", "shard_tensors", "system_graph"]

# what tensor parallelism cannot fuse: residuals into the all-reduced projections, the
# argmax into an LM head holding a slice of the vocabulary
TP_UNFUSED = {"residual_epilogue": False, "argmax_epilogue": False}


@dataclass
class CompiledSystem:
    """The system program of one step and how to feed it, device by device."""

    cfg: ModelConfig
    system: System
    partition: Partition
    graph: OpGraph  # one tensor-parallel device's share, every layer
    stages: list[CompiledModel]
    program: SystemProgram

    @property
    def logits(self) -> str:
        return self.stages[-1].logits

    @property
    def last_device(self) -> int:
        return self.partition.devices_of(self.partition.pp - 1)[0]

    def place(self, mems: dict[int, object], weights: Weights) -> None:
        """Write each device's share of every weight into its memory."""
        tp = self.partition.tp
        for s, cm in enumerate(self.stages):
            nodes = [n for n in cm.graph if n.name in cm.choices]
            for r, d in enumerate(self.partition.devices_of(s)):
                cm.linked.place(mems[d], {n.name: shard_tensors(self.cfg, n, node_weights(
                    weights, n), tp, r) for n in nodes})

    def inputs(self, weights: Weights, ids: np.ndarray,
               positions: np.ndarray) -> dict[int, dict[str, np.ndarray]]:
        """Host inputs of every device: token ids and its share of the constants."""
        tp = self.partition.tp
        out: dict[int, dict[str, np.ndarray]] = {}
        pos = np.tile(np.asarray(positions), self.graph.batch)
        for s, cm in enumerate(self.stages):
            nodes = [n for n in cm.graph if n.name in cm.choices]
            names = {b.name for b in cm.program.buffers}
            for r, d in enumerate(self.partition.devices_of(s)):
                feed = {"ids": np.asarray(ids, dtype=np.float32).reshape(-1)} \
                    if "ids" in names else {}
                for n in nodes:
                    for name, v in node_constants(weights, n, pos).items():
                        feed[f"{n.name}.{name}"] = shard_tensors(self.cfg, n, {name: v}, tp,
                                                                 r)[name]
                out[d] = cm.linked.bind(feed)
        return out


def _parts(cfg: ModelConfig, role: str) -> list[int] | None:
    """Row blocks of a role's weight that split separately (None: split the columns)."""
    q, kv, inter = cfg.q_dim, cfg.kv_dim, cfg.intermediate
    return {"q_proj": [q], "k_proj": [kv], "v_proj": [kv], "qkv_proj": [q, kv, kv],
            "ffn_gate": [inter], "ffn_up": [inter], "gate_up": [inter, inter],
            "lm_head": [cfg.vocab]}.get(role)


def shard_tensors(cfg: ModelConfig, node: OpNode, tensors: dict[str, np.ndarray], tp: int,
                  rank: int) -> dict[str, np.ndarray]:
    """Device ``rank`` of ``tp``'s share of a node's weights ``W`` and bias ``b``: the
    rows of each output block (q | k | v, gate | up, vocabulary) or, for the reduced
    projections, the columns; everything else whole."""
    if tp == 1:
        return tensors
    out = dict(tensors)
    parts = _parts(cfg, node.role)
    for name in ("W", "b"):
        if name not in tensors:
            continue
        t = np.asarray(tensors[name])
        if node.role in REDUCED and name == "W":
            c = t.shape[1] // tp
            out[name] = t[:, rank * c:(rank + 1) * c]
        elif parts is not None:
            blocks, at = [], 0
            for p in parts:
                c = p // tp
                blocks.append(t[at + rank * c:at + (rank + 1) * c])
                at += p
            out[name] = np.concatenate(blocks, axis=0)
    return out


def system_graph(cfg: ModelConfig, part: Partition, *, phase: str, batch: int,
                 context: int | None, capacity: int | None = None,
                 fusion: dict | None = None) -> OpGraph:
    """One tensor-parallel device's graph of the step (residuals never fused into the
    reduced projections, nor the argmax into the LM head, when ``tp > 1``)."""
    plan = fusion
    if part.tp > 1 and fusion:  # and the decisions that exist only with those (norm_epilogue)
        plan = {**upgrade_plan(fusion), **TP_UNFUSED}
        plan = {k: plan[k] for k in fusion_space().active(plan) if k in plan}
    graph = stacked_graph(cfg, phase=phase, batch=batch, context=context, capacity=capacity,
                          fusion=plan or None)[1]
    return shard_graph(graph, part.tp)


def _no_weights(mem: object, tensors: dict) -> None:
    """Transfers place nothing in the banks."""


def _hop(size: int, dst: str, off: int, group: int) -> Kernel:
    """Send ``x[size]`` to buffer ``dst`` (at ``off``) of the same-rank device of
    ``group``; signals ``sent`` on arrival."""
    link = Stream("link", "link", (), (
        Send(BufRef("x", aff(0), (size,)), BufRef(f"@{dst}", aff(off), (size,)),
             aff(0, dev=1), group), Signal("sent")))
    prog = Program((link,), (Buffer("x", "fp32", size),), name=f"hop_{size}")
    return Kernel(prog, ("x",), "x", (size,), _no_weights, ((size,),), ((size,),))


def _reorder(tp: int, m: int, vs: int) -> Kernel:
    """``y[m, tp*vs]`` from ``x[tp, m, vs]`` (the gathered vocabulary slices)."""
    out = BufRef("y", aff(0), (m, tp * vs))
    body = tuple(HostOp("copy_cols", (out,), (BufRef("x", aff(s * m * vs), (m, vs)), out),
                        (("lo", 0), ("hi", vs), ("col", s * vs), ("clear", int(s == 0))))
                 for s in range(tp))
    prog = Program((Stream("host", "host", (), body),),
                   (Buffer("x", "fp32", tp * m * vs), Buffer("y", "fp32", m * tp * vs)),
                   name=f"reorder_{tp}x{m}x{vs}")
    return Kernel(prog, ("x",), "y", (m, tp * vs), _no_weights, ((tp * m * vs,),),
                  ((tp * m * vs,),))


class _StageBuilder(_Builder):
    """A pipeline stage's builder: collectives after reduced projections and the head."""

    def __init__(self, graph: OpGraph, hw: Hardware, db: Database | None,
                 schedules: dict[str, Schedule] | None, placement: str | None,
                 tp: int, system: System, fitted: dict[str, Schedule] | None = None) -> None:
        super().__init__(graph, hw, db, schedules, placement, fitted)
        self.tp, self.system = tp, system

    def _rows(self) -> int:
        return self.graph.batch * self.graph.tokens

    def after(self, n: OpNode) -> None:
        if self.tp == 1:
            return
        w, tp = n.workload, self.tp
        if n.role in REDUCED:
            size = w.dims["m"] * output_width(w)
            algo = min(ALGORITHMS, key=lambda a: collective_ns(
                "all_reduce", tp, size, self.system.link, self.hw, a))
            home = self.out_home(n.name)
            self.frags.append(Fragment(f"{n.name}.ar", all_reduce(tp, size, algo),
                                       (("x", *home), ("y", *home))))
        elif n.role == "lm_head":
            m, vs = w.dims["m"], output_width(w)
            tag = f"{n.name}.all"
            self.frags.append(Fragment(tag, all_gather(tp, m * vs),
                                       (("x", *self.out_home(n.name)), ("y", tag))))
            if m > 1:
                self.frags.append(Fragment(f"{n.name}.full", _reorder(tp, m, vs),
                                           (("x", tag), ("y", f"{n.name}.full"))))
                tag = f"{n.name}.full"
            self.alias[n.name] = (tag, 0)


def compile_system(model: str | ModelConfig, system: str | Path | System, part: Partition, *,
                   db: str | Path | Database | None = None, phase: str = "decode",
                   batch: int = 1, context: int | None = None, capacity: int | None = None,
                   fusion: dict | None = None, placement: str | None = None,
                   schedules: dict[str, Schedule] | None = None,
                   graph: OpGraph | None = None, check: bool = True) -> CompiledSystem:
    """Compile one step of ``model`` for ``system`` under partition ``part``.

    ``placement`` is a plan of :data:`~autosched.compiler.placement.PLANS` (None: auto);
    ``graph``: the step's share graph already built (``system_graph``). ``check`` raises
    when a device's memory does not hold its share.
    """
    system = load_system(system)
    hw = system.device
    cfg = get_model_config(model)
    database = open_database(db) if db is not None else None
    if part.devices > system.devices:
        raise InternalError(f"partition {part.describe()} needs more than the "
                            f"{system.devices} devices of {system.name}")
    if placement not in (None, *PLANS):
        from sim.errors import AutoschedError

        raise AutoschedError(f"placement {placement!r} is not one of {', '.join(PLANS)}")
    if graph is None:
        graph = system_graph(cfg, part, phase=phase, batch=batch, context=context,
                             capacity=capacity, fusion=fusion)
    graph = pin_graph(graph, hw, database)
    where = stage_of(graph, part)
    # what each stage receives: (producer node, its home) per consuming stage
    sends: dict[int, list[tuple[int, OpNode]]] = {s: [] for s in range(part.pp)}
    for n in graph:
        for src in n.inputs:
            if where[src] < where[n.name] and all(p.name != src for _, p in sends[where[src]]):
                sends[where[src]].append((where[n.name], graph.node(src)))

    def build_stage(s: int, fitted: dict[str, Schedule] | None) -> CompiledModel:
        b = _StageBuilder(graph, hw, database, schedules, placement, part.tp, system, fitted)
        nodes = tuple(n for n in graph if where[n.name] == s)
        for n in nodes:
            b.add(n)
        keep = set()
        for dst, p in sends[s]:
            home, off = b.home(p.name)
            size = graph.batch * graph.tokens * output_width(p.workload)
            b.frags.append(Fragment(f"hop{s}.{p.name}", _hop(size, home, off, dst),
                                    (("x", home, off),)))
            keep.add(home)
        received = {b.home(src)[0] for n in nodes for src in n.inputs if where[src] < s}
        return link_step(cfg, graph, hw, b, nodes, name=f"{cfg.name}_{graph.phase}_stage{s}",
                         keep=frozenset(keep | received))

    stages: list[CompiledModel] = []
    for s in range(part.pp):
        cm = build_stage(s, None)
        if not cm.budget.fits and (denser := _compact_kv(cm)):
            cm = build_stage(s, denser)  # a device's cache in denser layouts, as on one device
        if check:
            cm.budget.check(f"{cfg.name} {graph.phase} batch {graph.batch} context "
                            f"{graph.context}, {part.describe()}, stage {s}, per device on "
                            f"{system.name}")
        stages.append(cm)
    groups = []
    for s, cm in enumerate(stages):
        waits = tuple(f"hop{src}.{p.name}.sent" for src in range(s)
                      for dst, p in sends[src] if dst == s)
        prog = _wait_first(cm.program, waits)
        cm.linked.program = prog
        groups.append(Group(part.devices_of(s), prog))
    sp = SystemProgram(tuple(groups), name=f"{cfg.name}_{graph.phase}_{part.describe()}")
    try:
        validate_system(sp, system)
    except ProgramError as e:
        raise InternalError(f"internal compiler error: linking {cfg.name} {graph.phase} for "
                            f"{system.name} ({part.describe()}) produced an invalid program: "
                            f"{e}") from e
    return CompiledSystem(cfg, system, part, graph, stages, sp)


def _wait_first(prog: Program, tokens: tuple[str, ...]) -> Program:
    """``prog`` whose host stream first waits for ``tokens`` (data from earlier stages)."""
    if not tokens:
        return prog
    streams = tuple(dataclasses.replace(s, body=(Wait(tokens), *s.body)) if s.engine == "host"
                    else s for s in prog.streams)
    return dataclasses.replace(prog, streams=streams)

