"""The search over partitions, and the bound of a step under one.

:func:`choose_partition` ranks every partition the model admits on a system
(``partition.candidates``; one device admits ``1x1`` alone) by an estimate: each stage's
analytical bound plus its collectives' estimated time
(``sim.kernels.collective.collective_ns``) and the pipeline sends, stages one after the
other; partitions whose weights, KV cache and tables cannot fit a device are ruled out.
:func:`partition_bound` is the bound no program of a partition beats.
"""

from __future__ import annotations

from autosched.families import family_of
from autosched.fusion import output_width
from autosched.ir import OpGraph, Step
from sim.errors import AutoschedError, SimError
from sim.hardware import Hardware, Link, System
from sim.kernels.collective import ALGORITHMS, collective_ns

from .bounds import step_bound
from .compile import partition_graph
from .partition import (
    REDUCED,
    Partition,
    PartitionError,
    candidates,
    check_placed,
    stage_of,
    tp_reasons,
)

__all__ = ["best_partition", "choose_partition", "parse_partition", "partition_bound",
           "unfit_reason"]

_MARGIN = 0.97  # of a device's capacity the estimate may fill (activations, layout padding)


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
            if kind is None or tp == 1 or n.role not in part.roles:
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


def partition_bound(graph: OpGraph, part: Partition, system: System) -> float:
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
    """Bytes the largest stage's share of weights, caches and tables needs."""
    where = stage_of(graph, part)
    per = [0.0] * part.pp
    for n in graph:
        w, fam = n.workload, family_of(n.workload)
        per[where[n.name]] += fam.weight_bytes(w, hw) + fam.cache_bytes(w, hw) + \
            fam.table_bytes(w, hw)
    return max(per)


def choose_partition(step: Step, system: System, *,
                     fusion: dict | None = None) -> list[dict]:
    """Every candidate partition of ``step`` on ``system`` with its estimate (ns) and
    whether it fits, fastest fitting first."""
    hw = system.device
    rows = []
    graphs: dict[tuple, OpGraph] = {}  # a device's graph depends on tp and what it splits
    for part in candidates(step.model, system):
        key = (part.tp, part.experts)
        try:
            if key not in graphs:
                graphs[key] = partition_graph(step, part, fusion)
            check_placed(graphs[key], part)
        except PartitionError:  # this partition cannot compute the step: not a candidate
            continue
        graph = graphs[key]
        need = _memory(graph, part, hw)
        fits = need <= _MARGIN * hw.capacity_bytes
        rows.append({"partition": part, "estimate_ns": _estimate(graph, part, system),
                     "bytes_per_device": need, "fits": fits})
    rows.sort(key=lambda r: (not r["fits"], r["estimate_ns"], r["partition"].devices))
    return rows


def unfit_reason(step: Step, system: System, rows: list[dict] | None = None) -> str | None:
    """Why no partition of ``step`` can fit a device of ``system``, or None when one may:
    the least any candidate needs per device (weights, KV cache and tables, the floor of
    what its memory plan places) is above a device's whole capacity. ``rows``:
    :func:`choose_partition`'s, when the caller has them."""
    rows = choose_partition(step, system) if rows is None else rows
    cap = system.device.capacity_bytes
    if not rows:
        return f"{step.describe()} has no partition on {system.name}"
    least = min(rows, key=lambda r: r["bytes_per_device"])
    if least["bytes_per_device"] <= cap:
        return None
    p = least["partition"]
    return (f"{step.describe()} does not fit {system.name}: its weights, KV cache and "
            f"tables need at least {least['bytes_per_device'] / 1e9:.1f} GB per device "
            f"(partition {p.tp}x{p.pp}) and a device holds {cap / 1e9:.1f} GB")


def parse_partition(text: str, step: Step, system: System) -> Partition:
    """``TPxPP`` (devices per stage x stages) as an even Partition of ``step``'s layers,
    refused with every reason it cannot be (divisibility, layers, devices)."""
    flat = str(text).lower().replace(" ", "")
    experts = flat.startswith("ep")  # ``ep4x2``: the four devices split the experts only
    try:
        tp, pp = (int(x) for x in flat.removeprefix("ep").split("x"))
    except ValueError:
        raise AutoschedError(f"partition {text!r}: write devices per stage x stages, "
                             "e.g. 8x2 (ep8x2: the eight split only the experts)") from None
    cfg = step.model
    why = tp_reasons(cfg, tp, experts) if tp >= 1 else [f"tp={tp} must be positive"]
    if pp < 1 or pp > cfg.layers:
        why.append(f"pp={pp} must be in [1, {cfg.layers}] (the model's layers)")
    if tp * pp > system.devices:
        why.append(f"{tp}x{pp} needs {tp * pp} devices, {system.name} has {system.devices}")
    if why:
        raise AutoschedError(f"partition {text}: " + "; ".join(why))
    return Partition.even(tp, pp, cfg.layers, experts)


def best_partition(step: Step, system: System, *, fusion: dict | None = None) -> Partition:
    """The fastest partition whose estimate fits a device (one device: ``1x1``); when
    none does, the one needing the least memory per device (compiling it says why)."""
    ranked = choose_partition(step, system, fusion=fusion)
    fit = [r for r in ranked if r["fits"]] or \
        sorted(ranked, key=lambda r: r["bytes_per_device"])[:1]
    if not fit:
        raise SimError(f"{step.describe()} does not fit {system.name}: no partition splits "
                       "it evenly")
    return fit[0]["partition"]
