"""End-to-end figures of one model step: latency, bound, baseline, throughput, memory.

* latency: the linked program on the cycle-level simulator;
* bound: :func:`autosched.compiler.bounds.step_bound` (valid whatever the placement and
  however host and PIM work overlap);
* baseline: the same model with every operator on its plain-memory path (weights and
  KV cache streamed over the external bus to the host), also simulated;
* budget: the device's memory plan, and the largest batch that fits at this context;
* ops: one row per distinct (workload, schedule): occurrences and its latency alone.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from autosched.codegen.registry import lowering_for
from autosched.database import Database, open_database
from autosched.frontend import ModelConfig, OpGraph
from sim.errors import CapacityError
from sim.hardware import Hardware
from sim.hwio import load_hardware
from sim.timing import simulate

from .bounds import step_bound
from .capacity import max_batch
from .compile import CompiledModel, compile_model
from .placement import PLANS, placement_key

__all__ = ["ModelFigures", "choose_plan", "plain_memory_ns", "simulate_model"]


@dataclass(frozen=True)
class ModelFigures:
    """What ``autosched simulate`` prints; ``to_dict`` is its JSON."""

    model: str
    hardware: str
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
    budget: dict = field(default_factory=dict)
    max_batch: int = 0

    def to_dict(self) -> dict:
        d = asdict(self)
        d["ops"] = list(self.ops)
        return d


def op_rows(cm: CompiledModel) -> list[dict]:
    """Per distinct (workload, schedule) in graph order: count, latency alone, bound."""
    rows: dict[tuple[str, str], dict] = {}
    for n in cm.graph:
        choice = cm.choices[n.name]
        key = (choice.workload.key, choice.schedule.key)
        if key not in rows:
            alone = simulate(cm.kernels[n.name].program, cm.hw).latency_ns
            rows[key] = {"op": n.workload.op, "workload": choice.workload.key, "role": n.role,
                         "count": 0, "latency_ns": alone,
                         "bound_ns": lowering_for(n.workload).bound(n.workload, cm.hw),
                         "lookup": choice.kind, "schedule": choice.schedule.to_dict()}
        rows[key]["count"] += 1
    return list(rows.values())


def plain_memory_ns(model: str | ModelConfig, hw: str | Hardware, *, phase: str = "decode",
                    batch: int = 1, context: int | None = None) -> float:
    """Latency of the step with every operator on its plain-memory path, unfused; nan
    when that program does not fit the device (the weights fit only in denser layouts
    than the ones the host path reads)."""
    try:
        base = compile_model(model, hw, phase=phase, batch=batch, context=context,
                             fusion={}, placement="host")
    except CapacityError:
        return math.nan
    return simulate(base.program, base.hw).latency_ns


def simulate_model(model: str | ModelConfig, hw: str | Hardware, *,
                   db: str | Path | Database | None = None, phase: str = "decode",
                   batch: int = 1, context: int | None = None,
                   fusion: dict | None = None, baseline: bool = True,
                   graph: OpGraph | None = None, schedules: str | None = None,
                   placement: str | None = None, ops: bool = True) -> ModelFigures:
    """Compile and simulate one step of ``model``, with its bound and (unless
    ``baseline`` is false, then nan) the plain-memory baseline. ``graph``: the step's
    graph already captured (and fused) by the caller. ``schedules="library"``: the
    shipped library kernels instead of the database's schedules; ``placement``: see
    :func:`compile_model`; ``ops``: time each distinct operator alone too."""
    hw = load_hardware(hw)
    t0 = time.perf_counter()
    cm = compile_model(model, hw, db=db, phase=phase, batch=batch, context=context,
                       fusion=fusion, graph=graph, schedules=schedules, placement=placement)
    res = simulate(cm.program, hw)
    base_ns = plain_memory_ns(model, hw, phase=phase, batch=batch, context=context) \
        if baseline else math.nan
    g = cm.graph
    tokens = g.batch * g.tokens
    return ModelFigures(
        model=cm.cfg.name, hardware=hw.name, phase=g.phase, batch=g.batch,
        context=g.context, latency_ns=res.latency_ns, bound_ns=step_bound(g, hw),
        baseline_ns=base_ns, tokens_per_s=tokens / (res.latency_ns * 1e-9),
        energy_pj=res.energy_pj, energy_per_token_pj=res.energy_pj / tokens,
        ops=tuple(op_rows(cm)) if ops else (), lookups=cm.lookup_counts(),
        sim_wall_s=time.perf_counter() - t0, host_ops=cm.graph.host_ops(),
        placement=cm.placement, budget=cm.budget.to_dict(), max_batch=max_batch(cm),
    )


def choose_plan(model: str | ModelConfig, hw: str | Hardware, *,
                db: str | Path | Database | None = None, phase: str = "decode",
                batch: int = 1, context: int | None = None,
                fusion: dict | None = None) -> dict[str, ModelFigures]:
    """Simulate the step under every placement plan (``auto``, ``pim``, ``host``), record
    the fastest in ``db`` (where ``compile``, ``simulate`` and ``run`` find it) and return
    every plan's figures; a plan that does not fit the device is left out."""
    from sim.errors import AutoschedError

    hw = load_hardware(hw)
    database = open_database(db) if db is not None else None
    figs: dict[str, ModelFigures] = {}
    for plan in PLANS:
        try:
            figs[plan] = simulate_model(model, hw, db=database, phase=phase, batch=batch,
                                        context=context, fusion=fusion, baseline=False,
                                        placement=plan, ops=False)
        except AutoschedError:
            continue
    if figs and database is not None:
        best = min(figs, key=lambda p: (figs[p].latency_ns, PLANS.index(p)))
        f = figs[best]
        database.save_plan(placement_key(f.model, f.phase, f.batch, f.context), hw.fingerprint,
                           {"placement": best}, f.latency_ns)
    return figs
