"""Figures of one step on a system of devices, and the search over partitions.

:func:`choose_partition` ranks every partition the model admits (``partition.candidates``)
by an estimate: each stage's analytical bound plus its collectives' estimated time
(``sim.kernels.collective.collective_ns``) and the pipeline sends, stages one after the
other; partitions whose weights and KV cache cannot fit a device are ruled out.
:func:`simulate_system_model` compiles the best one (the next if a device's memory plan
then does not fit), simulates it and reports latency, bound, the share of the step spent
communicating and every device's budget.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from autosched.database import Database
from autosched.frontend import ModelConfig, OpGraph, get_model_config
from autosched.fusion import output_width
from sim.errors import AutoschedError, SimError
from sim.hardware import Hardware, Link, System
from sim.kernels.collective import ALGORITHMS, collective_ns
from sim.system import load_system
from sim.timing import simulate_system

from .bounds import step_bound
from .partition import REDUCED, Partition, candidates, stage_of
from .system_compile import CompiledSystem, compile_system, system_graph

__all__ = ["SystemFigures", "choose_partition", "simulate_system_model", "system_bound"]

_MARGIN = 0.97  # of a device's capacity the estimate may fill (activations, layout padding)


@dataclass(frozen=True)
class SystemFigures:
    """What ``autosched simulate`` prints for a system; ``to_dict`` is its JSON."""

    model: str
    system: str
    phase: str
    batch: int
    context: int
    partition: dict
    latency_ns: float
    bound_ns: float
    tokens_per_s: float
    energy_pj: float
    comm_ns: float
    comm_share: float
    link_bytes: float
    budgets: tuple[dict, ...]
    candidates: tuple[dict, ...]
    sim_wall_s: float
    placement: str = "auto"
    lookups: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["budgets"], d["candidates"] = list(self.budgets), list(self.candidates)
        return d


def _floor(kind: str, n: int, nbytes: float, link: Link | None) -> float:
    """No collective of ``nbytes`` per device over ``n`` devices is faster: one start-up,
    and the bytes each port must carry (all-reduce: 2 (n-1)/n of them)."""
    if n == 1 or link is None:
        return 0.0
    share = 2 * (n - 1) / n if kind == "all_reduce" else n - 1
    return link.latency_ns + share * nbytes / link.bandwidth_gbps


def _stage_terms(graph: OpGraph, part: Partition, system: System, estimate: bool
                 ) -> list[tuple[list, dict[str, float], float]]:
    """Per stage: its nodes, the time after each node its collective takes (a floor or an
    estimate) and the stage's total link time."""
    hw, tp, where = system.device, part.tp, stage_of(graph, part)
    out = []
    for s in range(part.pp):
        nodes = [n for n in graph if where[n.name] == s]
        after: dict[str, float] = {}
        for n in nodes:
            kind = ("all_reduce" if n.role in REDUCED else
                    "all_gather" if n.role == "lm_head" else None)
            if kind is None or tp == 1:
                continue
            size = n.workload.dims["m"] * output_width(n.workload)
            if estimate:
                after[n.name] = min(collective_ns(kind, tp, size, system.link, hw, a)
                                    for a in ALGORITHMS)
            else:
                after[n.name] = _floor(kind, tp, 4 * size, system.link)
        out.append((nodes, after, sum(after.values())))
    return out


def _hops(graph: OpGraph, part: Partition, system: System, estimate: bool) -> float:
    if part.pp == 1 or system.link is None:
        return 0.0
    width = graph.nodes[0].workload.dims["n"] if graph.nodes else 0
    nbytes = 4 * graph.batch * graph.tokens * width
    one = system.link.transfer_ns(nbytes) if estimate else _floor("hop", 2, nbytes, system.link)
    return (part.pp - 1) * one


def system_bound(graph: OpGraph, part: Partition, system: System) -> float:
    """No program of this partition beats it: stages run one after the other (the next
    needs the previous one's output), each at least its nodes' bound with its collectives
    on the dependency chain and on the link, plus the sends between stages."""
    hw = system.device
    return sum(step_bound(nodes, hw, after=after, link_ns=link)
               for nodes, after, link in _stage_terms(graph, part, system, False)) + \
        _hops(graph, part, system, False)


def _estimate(graph: OpGraph, part: Partition, system: System) -> float:
    hw = system.device
    return sum(step_bound(nodes, hw) + link
               for nodes, _, link in _stage_terms(graph, part, system, True)) + \
        _hops(graph, part, system, True)


def _memory(graph: OpGraph, part: Partition, hw: Hardware) -> float:
    """Bytes the largest stage's share of weights, KV cache and embedding table needs."""
    where = stage_of(graph, part)
    per = [0.0] * part.pp
    for n in graph:
        w, d = n.workload, n.workload.dims
        if w.op in ("gemv", "gemm"):
            per[where[n.name]] += d["n"] * d["k"] * hw.elem_bytes
        elif w.op == "attention":
            cap = int(w.attr("capacity", d["l"]))
            per[where[n.name]] += 2 * d["b"] * cap * d["kvh"] * d["d"] * hw.elem_bytes
        elif w.op == "embedding":
            per[where[n.name]] += d["v"] * d["n"] * hw.elem_bytes
    return max(per)


def choose_partition(cfg: ModelConfig, system: System, *, phase: str, batch: int,
                     context: int | None, fusion: dict | None = None) -> list[dict]:
    """Every candidate partition with its estimate (ns) and whether it fits, fastest
    fitting first."""
    hw = system.device
    rows = []
    graphs: dict[int, OpGraph] = {}  # a device's graph depends on the partition's tp only
    for part in candidates(cfg, system):
        if part.tp not in graphs:
            graphs[part.tp] = system_graph(cfg, part, phase=phase, batch=batch,
                                           context=context, fusion=fusion)
        graph = graphs[part.tp]
        need = _memory(graph, part, hw)
        fits = need <= _MARGIN * hw.capacity_bytes
        rows.append({"partition": part, "estimate_ns": _estimate(graph, part, system),
                     "bytes_per_device": need, "fits": fits})
    rows.sort(key=lambda r: (not r["fits"], r["estimate_ns"], r["partition"].devices))
    return rows


def simulate_system_model(model: str | ModelConfig, system: str | Path | System, *,
                          db: str | Path | Database | None = None, phase: str = "decode",
                          batch: int = 1, context: int | None = None,
                          fusion: dict | None = None, placement: str | None = None,
                          partition: Partition | None = None,
                          tries: int = 3) -> tuple[SystemFigures, CompiledSystem]:
    """Choose a partition (unless given), compile, simulate; the figures and the program."""
    t0 = time.perf_counter()
    system = load_system(system)
    cfg = get_model_config(model)
    ranked = choose_partition(cfg, system, phase=phase, batch=batch, context=context,
                              fusion=fusion)
    order = [partition] if partition is not None else \
        [r["partition"] for r in ranked if r["fits"]][:tries]
    if not order:
        best = min(ranked, key=lambda r: r["bytes_per_device"]) if ranked else None
        why = (f"the smallest share needs {best['bytes_per_device'] / 1e9:.1f} GB per device, "
               f"a device has {system.device.capacity_bytes / 1e9:.1f} GB") if best else \
            "no partition splits it evenly"
        raise SimError(f"{cfg.name} {phase} batch {batch} does not fit {system.name}: {why}")
    err: AutoschedError | None = None
    for part in order:
        try:
            cs = compile_system(cfg, system, part, db=db, phase=phase, batch=batch,
                                context=context, fusion=fusion, placement=placement)
            break
        except SimError as e:  # a device's memory plan did not fit: the next candidate
            err = e
    else:
        raise err
    res = simulate_system(cs.program, system)
    g = cs.graph
    tokens = g.batch * g.tokens
    cands = tuple({**{k: v for k, v in r.items() if k != "partition"},
                   **r["partition"].to_dict()} for r in ranked)
    lookups: dict[str, int] = {}
    for cm in cs.stages:
        for k, v in cm.lookup_counts().items():
            lookups[k] = lookups.get(k, 0) + v
    figs = SystemFigures(
        model=cfg.name, system=system.name, phase=g.phase, batch=g.batch, context=g.context,
        partition=cs.partition.to_dict(), latency_ns=res.latency_ns,
        bound_ns=system_bound(g, cs.partition, system),
        tokens_per_s=tokens / (res.latency_ns * 1e-9), energy_pj=res.energy_pj,
        comm_ns=res.comm_ns, comm_share=res.comm_share, link_bytes=res.link_bytes,
        budgets=tuple(cm.budget.to_dict() for cm in cs.stages), candidates=cands,
        sim_wall_s=time.perf_counter() - t0, placement=placement or "auto", lookups=lookups)
    return figs, cs
