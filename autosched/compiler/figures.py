"""End-to-end figures of one step on a system (one device is the system of one):
latency, bound, baseline, throughput, communication, memory.

* partition: the given one, else the fastest that fits (:func:`~.choose.choose_partition`;
  one device admits ``1x1`` alone), the next candidates tried if a device's memory plan
  then does not fit;
* latency: the system program on the cycle-level simulator;
* bound: :func:`~.choose.partition_bound` (valid whatever the placement and however host,
  PIM and link work overlap);
* baseline: the same step with every operator on its plain-memory path (weights and KV
  cache streamed over the external bus to the host), also simulated;
* budgets: every stage's memory plan, and the largest batch that fits at this context;
* ops: one row per distinct (workload, schedule): occurrences and its latency alone.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field

from autosched.database import Database
from autosched.families import family_of, host_ops
from autosched.ir import OpGraph, PlanKey, PlanKind, Step
from sim.errors import AutoschedError, CapacityError, SimError
from sim.hardware import System
from sim.timing import simulate, simulate_system

from .capacity import max_batch
from .choose import choose_partition, partition_bound
from .compile import CompiledStep, compile_step
from .partition import Partition
from .placement import PLACEMENTS

__all__ = ["StepFigures", "choose_placement", "op_rows", "plain_memory_ns", "simulate_step"]


@dataclass(frozen=True)
class StepFigures:
    """What ``autosched simulate`` prints; ``to_dict`` is its JSON."""

    model: str
    hardware: str  # the system's name (a device preset's name for one device)
    phase: str
    batch: int
    context: int
    latency_ns: float
    bound_ns: float
    baseline_ns: float
    tokens_per_s: float
    energy_pj: float
    energy_per_token_pj: float
    ops: tuple[dict, ...]
    lookups: dict
    sim_wall_s: float
    host_ops: dict = field(default_factory=dict)  # op key -> nodes (OpGraph.host_ops)
    placement: str = "auto"
    budget: dict = field(default_factory=dict)  # the tightest stage's, per device
    max_batch: int = 0
    partition: dict = field(default_factory=dict)
    devices: int = 1
    comm_ns: float = 0.0
    comm_share: float = 0.0
    link_bytes: float = 0.0
    budgets: tuple[dict, ...] = ()  # every stage's, per device
    candidates: tuple[dict, ...] = ()
    plans_from: str = ""  # whose stored fusion and placement plans were taken

    def to_dict(self) -> dict:
        d = asdict(self)
        d["ops"], d["budgets"], d["candidates"] = (list(self.ops), list(self.budgets),
                                                   list(self.candidates))
        return d


def op_rows(cs: CompiledStep) -> list[dict]:
    """Per distinct (workload, schedule) in graph order: count, latency alone, bound."""
    rows: dict[tuple[str, str], dict] = {}
    choices, kernels, hw = cs.choices, cs.kernels, cs.hw
    for n in cs.graph:
        choice = choices[n.name]
        key = (choice.workload.key, choice.schedule.key)
        if key not in rows:
            alone = simulate(kernels[n.name].program, hw).latency_ns
            rows[key] = {"op": n.workload.op, "workload": choice.workload.key, "role": n.role,
                         "count": 0, "latency_ns": alone,
                         "bound_ns": family_of(n.workload).bound(n.workload, hw),
                         "lookup": str(choice.kind), "schedule": choice.schedule.to_dict()}
        rows[key]["count"] += 1
    return list(rows.values())


def plain_memory_ns(step: Step, system: System, *,
                    partition: Partition | None = None) -> float:
    """Latency of ``step`` with every operator on its plain-memory path, unfused; nan when
    that program does not fit (the weights fit only in denser layouts than the ones the
    host path reads)."""
    try:
        base = compile_step(step, system, partition=partition, fusion={}, placement="host")
    except CapacityError:
        return math.nan
    return simulate_system(base.program, system).latency_ns


def _ranked(step: Step, system: System, fusion: dict | None, partition: Partition | None,
            graph: OpGraph | None, tries: int) -> tuple[list[Partition], list[dict]]:
    """The partitions to try in order, and every candidate's row."""
    if partition is not None or graph is not None:
        return [partition or Partition.single(step.model.layers)], []
    ranked = choose_partition(step, system, fusion=fusion)
    order = [r["partition"] for r in ranked if r["fits"]][:tries]
    if not order and ranked:  # no estimate fits: the compiler's own plan says why
        order = [min(ranked, key=lambda r: r["bytes_per_device"])["partition"]]
    return order, ranked


def simulate_step(step: Step, system: System, *, db: Database | None = None,
                  fusion: dict | None = None, baseline: bool = True,
                  graph: OpGraph | None = None, schedules: str | dict | None = None,
                  placement: str | None = None, ops: bool = True,
                  partition: Partition | None = None, tries: int = 3) -> StepFigures:
    """Compile and simulate ``step`` on ``system``, with its bound and (unless
    ``baseline`` is false, then nan) the plain-memory baseline. ``graph``: the step's
    graph already captured (and fused) by the caller (one device's, partition ``1x1``
    unless given); ``schedules``, ``placement``: see :func:`compile_step`; ``ops``: time
    each distinct operator alone too."""
    t0 = time.perf_counter()
    order, ranked = _ranked(step, system, fusion, partition, graph, tries)
    if not order:
        raise SimError(f"{step.describe()} does not fit {system.name}: no partition splits "
                       "it evenly")
    err: AutoschedError | None = None
    for part in order:
        try:
            cs = compile_step(step, system, partition=part, db=db, fusion=fusion,
                              graph=graph, schedules=schedules, placement=placement)
            break
        except SimError as e:  # a device's memory plan did not fit: the next candidate
            err = e
    else:
        raise err
    res = simulate_system(cs.program, system)
    base_ns = plain_memory_ns(step, system, partition=cs.partition) if baseline else math.nan
    g = cs.graph
    tokens = g.batch * g.tokens
    cands = tuple({**{k: v for k, v in r.items() if k != "partition"},
                   **r["partition"].to_dict()} for r in ranked)
    return StepFigures(
        model=cs.name, hardware=system.name, phase=g.phase, batch=g.batch, context=g.context,
        latency_ns=res.latency_ns, bound_ns=partition_bound(g, cs.partition, system),
        baseline_ns=base_ns, tokens_per_s=tokens / (res.latency_ns * 1e-9),
        energy_pj=res.energy_pj, energy_per_token_pj=res.energy_pj / tokens,
        ops=tuple(op_rows(cs)) if ops else (), lookups=cs.lookup_counts(),
        sim_wall_s=time.perf_counter() - t0, host_ops=host_ops(g), placement=cs.placement,
        budget=cs.budget.to_dict(), max_batch=min(max_batch(st) for st in cs.stages),
        partition=cs.partition.to_dict(), devices=cs.partition.devices,
        comm_ns=res.comm_ns, comm_share=res.comm_share, link_bytes=res.link_bytes,
        budgets=tuple(st.budget.to_dict() for st in cs.stages), candidates=cands,
        plans_from=cs.plans_from)


def choose_placement(step: Step, system: System, *, db: Database | None = None,
                fusion: dict | None = None,
                partition: Partition | None = None) -> dict[str, StepFigures]:
    """Simulate the step under every placement plan (``auto``, ``pim``, ``host``), record
    the fastest in ``db`` (where ``compile``, ``simulate`` and ``run`` find it) and return
    every plan's figures; a plan that does not fit is left out."""
    figs: dict[str, StepFigures] = {}
    for plan in PLACEMENTS:
        try:
            figs[plan] = simulate_step(step, system, db=db, fusion=fusion, baseline=False,
                                       placement=plan, ops=False, partition=partition)
        except AutoschedError:
            continue
    if figs and db is not None:
        best = min(figs, key=lambda p: (figs[p].latency_ns, PLACEMENTS.index(p)))
        db.save_plan(str(PlanKey.of(PlanKind.PLACEMENT, step)), system.device.fingerprint,
                     {"placement": best}, figs[best].latency_ns)
    return figs
