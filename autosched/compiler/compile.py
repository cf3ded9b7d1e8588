"""Whole-step compilation: one model step, a system and a partition -> one system program.

A single device is the system of one under the partition ``1x1``; nothing here tells the
two apart. The step's graph is captured once for the whole model (fused by the plan) and
rewritten into one tensor-parallel device's share (:func:`~.partition.shard_graph`).
Each pipeline stage is then built from its nodes: a schedule per node from the database
(exact, nearest, default: :mod:`autosched.lookup`), an explicit per-node mapping, the
shipped library kernels (``schedules="library"``) or a placement plan forcing one side;
kernels are lowered by their families and linked into the stage's program, whose memory
plan is checked against a device. Every node's output lives in a global host buffer
named after the node; at one row, producers that feed a concatenation write straight
into windows of a shared buffer (:mod:`.builder`). When a stage's memory plan
overflows, each family makes its part denser (the KV cache, then the weights, then the
cache again: ``Family.fit_memory``); a step of several rows that still does not fit
reads the weights in the layouts its one-row decode step was fitted to. Multi-row GEMVs
read their weights where one-row steps keep them (``Family.pin``).

Between devices (:mod:`.builder`): an all-reduce after each reduced projection, an
all-gather of the logits, and a send of every buffer a later stage reads.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from autosched.database import Database
from autosched.families import families, family_of
from autosched.ir import OpGraph, Step
from autosched.lookup import LookupResult
from search_spaces import Schedule
from search_spaces.fusion import fusion_default, fusion_space, upgrade_plan
from sim.collector import collector_paused
from sim.errors import AutoschedError, CapacityError, InternalError, ProgramError
from sim.functional import DeviceMemory, execute_system
from sim.hardware import Hardware, System
from sim.isa import Wait
from sim.kernels import Kernel
from sim.program import Program
from sim.sysprog import Group, SystemProgram, validate_system

from .builder import Builder, link_stage
from .partition import Partition, check_placed, shard_graph, shard_tensors, stage_of
from .placement import PLACEMENTS
from .stage import CompiledStage
from .stored import StoredPlans, stored_plans

__all__ = ["FIT_ORDER", "TP_UNFUSED", "CompiledStep", "compile_step", "partition_graph",
           "pin_graph"]

# what tensor parallelism cannot fuse: residuals into the all-reduced projections, the
# argmax into an LM head holding a slice of the vocabulary
TP_UNFUSED = {"residual_epilogue": False, "argmax_epilogue": False}
# the memory a stage makes denser, in turn, while its plan overflows (Family.memory_kind)
FIT_ORDER = ("replicas", "cache", "weights", "cache")


@dataclass
class CompiledStep:
    """The system program of one step and how to feed it, device by device."""

    step: Step | None
    system: System
    partition: Partition
    graph: OpGraph  # one tensor-parallel device's share, every layer
    stages: list[CompiledStage]
    program: SystemProgram
    placement: str = "auto"
    plans_from: str = ""  # whose stored plans were taken (StoredPlans.note), if looked up

    @property
    def hw(self) -> Hardware:
        return self.system.device

    @property
    def name(self) -> str:
        return self.step.name if self.step is not None else self.graph.model

    @property
    def cfg(self):
        """The model's config (None for a graph compiled without one)."""
        return self.step.model if self.step is not None else None

    @property
    def logits(self) -> str:
        return self.stages[-1].logits

    @property
    def token(self) -> str:
        return self.stages[-1].token

    @property
    def last_device(self) -> int:
        return self.partition.devices_of(self.partition.pp - 1)[0]

    @property
    def choices(self) -> dict[str, LookupResult]:
        """Every node's schedule and where it came from, over every stage."""
        return {k: v for st in self.stages for k, v in st.choices.items()}

    @property
    def kernels(self) -> dict[str, Kernel]:
        return {k: v for st in self.stages for k, v in st.kernels.items()}

    @property
    def budget(self):
        """The memory plan of the stage with the least free memory (per device)."""
        return min((st.budget for st in self.stages), key=lambda b: b.free)

    def lookup_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for r in self.choices.values():
            counts[str(r.kind)] = counts.get(str(r.kind), 0) + 1
        return counts

    def place(self, mems: dict[int, object], weights: object) -> None:
        """Write each device's share of every weight into its memory ``mems[device]``."""
        tp = self.partition.tp
        for s, st in enumerate(self.stages):
            nodes = [n for n in st.graph if n.name in st.choices]
            for r, d in enumerate(self.partition.devices_of(s)):
                st.linked.place(mems[d], {n.name: shard_tensors(
                    self.step, n, family_of(n.workload).weights(weights, n), tp, r,
                    self.partition.roles)
                    for n in nodes})

    def memories(self) -> dict[int, DeviceMemory]:
        """A fresh simulated memory for every device the partition uses."""
        return {d: DeviceMemory(self.hw) for d in range(self.partition.devices)}

    def execute(self, mems: dict[int, DeviceMemory], weights: object, ids: np.ndarray,
                positions: np.ndarray) -> dict[int, dict[str, np.ndarray]]:
        """Run the program on ``mems`` (weights placed, caches kept between calls) for
        token ``ids`` at ``positions``: every device's host buffers after the step."""
        return execute_system(self.program, self.system, mems,
                              self.inputs(weights, ids, positions))

    def outputs(self, out: dict[int, dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
        """The host buffers of the device holding the step's logits."""
        return out[self.last_device]

    def inputs(self, weights: object, ids: np.ndarray,
               positions: np.ndarray) -> dict[int, dict[str, np.ndarray]]:
        """Host inputs of every device: token ``ids`` ``[batch, tokens]`` at ``positions``
        ``[tokens]`` and its share of every node's constants."""
        tp = self.partition.tp
        pos = np.tile(np.asarray(positions), self.graph.batch)
        out: dict[int, dict[str, np.ndarray]] = {}
        for s, st in enumerate(self.stages):
            nodes = [n for n in st.graph if n.name in st.choices]
            names = {b.name for b in st.program.buffers}
            consts = {n.name: family_of(n.workload).constants(weights, n, pos) for n in nodes}
            for r, d in enumerate(self.partition.devices_of(s)):
                feed = {"ids": np.asarray(ids, dtype=np.float32).reshape(-1)} \
                    if "ids" in names else {}
                for n in nodes:
                    for name, v in shard_tensors(self.step, n, consts[n.name], tp, r,
                                                 self.partition.roles).items():
                        feed[f"{n.name}.{name}"] = v
                out[d] = st.linked.bind(feed)
        return out


def partition_graph(step: Step, part: Partition, fusion: dict | None = None) -> OpGraph:
    """One tensor-parallel device's graph of ``step`` (residuals never fused into the
    reduced projections, nor the argmax into the LM head, when ``tp > 1``)."""
    from autosched.pipeline import step_graph

    plan = fusion
    if part.tp > 1 and fusion:  # and the decisions that exist only with those
        plan = {**upgrade_plan(fusion), **TP_UNFUSED}
        plan = {k: plan[k] for k in fusion_space().active(plan) if k in plan}
    graph = step_graph(step, plan or None)
    check_placed(graph, part)
    return shard_graph(graph, part.tp, part.roles)


def compile_step(step: Step | None, system: System, *, partition: Partition | None = None,
                 db: Database | None = None, fusion: dict | None = None,
                 schedules: dict[str, Schedule] | str | None = None,
                 placement: str | None = None, graph: OpGraph | None = None,
                 keep_outputs: bool = False, check: bool = True) -> CompiledStep:
    """Compile ``step`` for ``system`` under ``partition`` (None: one device, ``1x1``).

    ``fusion``: a plan (``{}`` for none); None means the plan ``tune`` stored in ``db`` for
    this step, or the default plan (:func:`~search_spaces.fusion.fusion_default`: every
    fusion on, as any compiler fuses before it is tuned; none for the library program).
    ``schedules``: node name -> schedule (others looked up), or ``"library"`` for the
    shipped library kernels everywhere. ``placement``: ``auto`` (every operator's looked-up
    schedule), ``pim`` or ``host`` (every operator on that side); None means the plan stored
    in ``db`` for this step, or ``auto`` (a stored plan whose schedules are ``default``
    compiles as if ``db`` held no schedule). ``graph``: the step's share graph already built
    (``step`` may then be None: a graph with no model config, as the ``torch.compile``
    backend has). ``keep_outputs``: every node's output stays readable after a run.
    ``check`` raises :class:`CapacityError` when a device's memory does not hold its share
    after fitting.
    """
    hw = system.device
    if step is None and graph is None:
        raise AutoschedError("compile_step needs a step or its graph")
    layers = step.model.layers if step is not None else 1 + max(
        (n.layer for n in graph if n.layer is not None), default=0)
    part = partition or Partition.single(layers)
    if part.devices > system.devices:
        raise AutoschedError(f"partition {part.describe()} needs more than the "
                             f"{system.devices} devices of {system.name}")
    looked = db is not None and step is not None and (
        placement is None or (fusion is None and graph is None))
    plans = stored_plans(db, step, hw) if looked else StoredPlans()
    stored, asked = plans.placement or {}, placement
    if placement is None:
        placement = stored.get("placement")
    if placement not in (None, *PLACEMENTS):
        raise AutoschedError(f"placement {placement!r} is not one of {', '.join(PLACEMENTS)}")
    if fusion is None and graph is None:
        # the library program is the hand-kernel baseline: one library kernel per operator
        fallback = {} if schedules == "library" else fusion_default()
        fusion = plans.fusion if plans.fusion is not None else fallback
    if stored.get("schedules") == "default" and asked is None and schedules is None:
        db = None  # tune found this step fastest on the default schedules
    if graph is None:
        graph = partition_graph(step, part, fusion)
    graph = pin_graph(graph, hw, db)
    stages = _stages(step, system, part, graph, db, schedules, placement, keep_outputs)
    if step is not None and graph.batch * graph.tokens > 1 and \
            not all(st.budget.fits for st in stages):
        moved = _follow_one_row(step, system, part, graph, db, fusion, placement)
        if moved is not None:
            graph = moved
            stages = _stages(step, system, part, graph, db, schedules, placement,
                             keep_outputs)
    name = step.name if step is not None else graph.model
    if check:
        for s, st in enumerate(stages):
            where = f", {part.describe()}, stage {s}, per device" if part.devices > 1 else ""
            st.budget.check(f"{name} {graph.phase} batch {graph.batch} context "
                            f"{graph.context}{where} on {system.name}")
    sp = _system_program(stages, part, name, graph.phase)
    try:  # every kernel was validated by build(); what is left to break is the linking
        with collector_paused():
            validate_system(sp, system)
    except ProgramError as e:
        raise InternalError(f"internal compiler error: linking {name} {graph.phase} for "
                            f"{system.name} ({part.describe()}) produced an invalid program: "
                            f"{e}") from e
    return CompiledStep(step, system, part, graph, stages, sp, placement or "auto",
                        plans.note if looked else "")


def pin_graph(graph: OpGraph, hw: Hardware, db: Database | None) -> OpGraph:
    """``graph`` with every workload reading its weights where one-row steps keep them."""
    nodes = tuple(dataclasses.replace(n, workload=family_of(n.workload).pin(n.workload, hw, db))
                  for n in graph.nodes)
    return dataclasses.replace(graph, nodes=nodes)


def _follow_one_row(step: Step, system: System, part: Partition, graph: OpGraph,
                    db: Database | None, fusion: dict | None,
                    placement: str | None) -> OpGraph | None:
    """``graph`` with its weights in the layouts the one-row decode step of ``step`` was
    fitted to (a step of several rows reads the weights where that step keeps them);
    None when that step does not fit either or moves nothing."""
    try:
        one = compile_step(step.replace(phase="decode", batch=1, capacity=None), system,
                           partition=part, db=db, fusion=fusion, placement=placement)
    except CapacityError:
        return None
    moved: dict = {}
    for fam in families():
        moved.update(fam.follow_fit(graph, one))
    if not moved:
        return None
    nodes = tuple(dataclasses.replace(n, workload=moved.get(n.name, n.workload))
                  for n in graph.nodes)
    return dataclasses.replace(graph, nodes=nodes)


def _sends(graph: OpGraph, part: Partition) -> tuple[dict[str, int], dict[int, list]]:
    """The stage of every node, and per stage what later stages read from it: (consuming
    stage, producer node), each producer once."""
    where = stage_of(graph, part)
    sends: dict[int, list] = {s: [] for s in range(part.pp)}
    for n in graph:
        for src in n.inputs:
            if where[src] < where[n.name] and all(p.name != src for _, p in sends[where[src]]):
                sends[where[src]].append((where[n.name], graph.node(src)))
    return where, sends


@collector_paused()
def _stages(step: Step | None, system: System, part: Partition, graph: OpGraph,
            db: Database | None, schedules, placement: str | None,
            keep_outputs: bool) -> list[CompiledStage]:
    """Every pipeline stage built and linked, each fitted to a device's memory."""
    where, sends = _sends(graph, part)
    name = step.name if step is not None else graph.model
    out = []
    for s in range(part.pp):
        nodes = tuple(n for n in graph if where[n.name] == s)
        received = frozenset(src for n in nodes for src in n.inputs if where[src] < s)
        tag = f"{name}_{graph.phase}" + (f"_stage{s}" if part.pp > 1 else "")
        waits = tuple(f"hop{src}.{p.name}.sent" for src in range(s)
                      for dst, p in sends[src] if dst == s)

        def build(fitted: dict[str, Schedule], nodes=nodes, received=received, s=s,
                  tag=tag, waits=waits) -> CompiledStage:
            b = Builder(graph, system, db, schedules, placement, part.tp, fitted,
                        roles=part.roles)
            for n in nodes:
                b.add(n)
            return link_stage(graph, b, nodes, name=tag, sends=sends[s], stage=s,
                              received=received, waits=waits, keep_outputs=keep_outputs)

        fitted: dict[str, Schedule] = {}
        st = build(fitted)
        for kind in FIT_ORDER:
            if st.budget.fits:
                break
            more: dict[str, Schedule] = {}
            for fam in families():
                if fam.memory_kind == kind:
                    more.update(fam.fit_memory(st))
            if more:
                fitted.update(more)
                st = build(fitted)
        out.append(st)
    return out


def _system_program(stages: list[CompiledStage], part: Partition, name: str,
                    phase: str) -> SystemProgram:
    """One device group per stage; a stage's host first waits for what earlier stages
    send it."""
    groups = []
    for s, st in enumerate(stages):
        prog = _wait_first(st.program, st.waits)
        st.linked.program = prog
        groups.append(Group(part.devices_of(s), prog))
    label = name if part.devices == 1 else f"{name}_{phase}_{part.describe()}"
    return SystemProgram(tuple(groups), name=label)


def _wait_first(prog: Program, tokens: tuple[str, ...]) -> Program:
    """``prog`` whose host stream first waits for ``tokens`` (data from earlier stages)."""
    if not tokens:
        return prog
    streams = tuple(dataclasses.replace(s, body=(Wait(tokens), *s.body)) if s.engine == "host"
                    else s for s in prog.streams)
    return dataclasses.replace(prog, streams=streams)
