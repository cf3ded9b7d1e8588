"""The multi-device half of ``compile``, ``simulate`` and ``run``: partitions, per-device
budgets, communication; and the memory budget rows every one of them prints."""

from __future__ import annotations

import argparse
from pathlib import Path

from .output import kv_table, print_json, table

__all__ = ["budget_rows", "compile_system_cmd", "partition_arg", "resolve_partition",
           "simulate_system_cmd", "system_of"]


def system_of(hw: str, partition: str | None = None):
    """The System of ``--hw`` when it has several devices, else None (a ``--partition``
    other than 1x1 on one device is refused)."""
    from sim.errors import AutoschedError
    from sim.system import load_system

    s = load_system(hw)
    if s.devices > 1:
        return s
    if partition is not None and partition.lower().replace(" ", "") != "1x1":
        raise AutoschedError(f"--partition {partition}: {s.name} is one device (use a "
                             "system file of several devices, e.g. hbm-pim-x16)")
    return None


def partition_arg(text: str | None, model: str, system):
    """``--partition TPxPP`` as a Partition of the model's layers (None: search)."""
    if text is None:
        return None
    from autosched.compiler.partition import Partition, tp_reasons
    from autosched.frontend import get_model_config
    from sim.errors import AutoschedError

    try:
        tp, pp = (int(x) for x in text.lower().split("x"))
    except ValueError:
        raise AutoschedError(f"--partition {text!r}: write devices per stage x stages, "
                             "e.g. 8x2") from None
    cfg = get_model_config(model)
    why = tp_reasons(cfg, tp) if tp >= 1 else [f"tp={tp} must be positive"]
    if pp < 1 or pp > cfg.layers:
        why.append(f"pp={pp} must be in [1, {cfg.layers}] (the model's layers)")
    if tp * pp > system.devices:
        why.append(f"{tp}x{pp} needs {tp * pp} devices, {system.name} has {system.devices}")
    if why:
        raise AutoschedError(f"--partition {text}: " + "; ".join(why))
    return Partition.even(tp, pp, cfg.layers)


def _gb(x: float) -> str:
    """Bytes in GB, or in MB below a tenth of a GB (small models)."""
    return f"{x / 1e9:.2f} GB" if x >= 1e8 else f"{x / 1e6:.2f} MB"


def budget_rows(b: dict) -> list[tuple[str, object]]:
    """The memory budget of one device as (label, value) rows."""
    return [
        ("weights", f"{_gb(b['weights'])} ({_gb(b['weights_data'])} of weights, "
                    f"{_gb(b['weights'] - b['weights_data'])} layout padding)"),
        ("kv_cache", f"{_gb(b['kv'])} ({_gb(b.get('kv_data', 0))} of keys and values)"),
        ("constants", _gb(b["constants"])),
        ("activations", f"{_gb(b['activations'])} (by liveness)"),
        ("free", f"{_gb(b['free'])} of {_gb(b['capacity'])}"),
    ]


def resolve_partition(text: str | None, model: str, system, *, phase: str, batch: int,
                      context: int | None):
    """``--partition`` if given, else the fastest partition that fits."""
    part = partition_arg(text, model, system)
    if part is not None:
        return part
    from autosched.compiler.system_figures import choose_partition
    from autosched.frontend import get_model_config
    from sim.errors import SimError

    fit = [r for r in choose_partition(get_model_config(model), system, phase=phase,
                                       batch=batch, context=context) if r["fits"]]
    if not fit:
        raise SimError(f"{model} {phase} batch {batch} does not fit {system.name} under any "
                       "partition")
    return fit[0]["partition"]


def compile_system_cmd(args: argparse.Namespace, system, db, out: Path,
                       asm: Path | None) -> int:
    """``compile`` on a system: the partitioned program written to ``out`` (and ``asm``)."""
    from autosched.compiler.system_compile import compile_system

    from .checks import write_atomic

    part = resolve_partition(args.partition, args.model, system, phase=args.phase,
                             batch=args.batch, context=args.context)
    cs = compile_system(args.model, system, part, db=db, phase=args.phase,
                        batch=args.batch, context=args.context, placement=args.placement)
    write_atomic(out, lambda p: p.write_text(cs.program.to_json()))
    if asm is not None:
        write_atomic(asm, lambda p: p.write_text(cs.program.to_asm()))
    print(f"{cs.cfg.name} {cs.graph.phase} on {system.name}: {part.describe()}, "
          f"{len(cs.program.groups)} device groups")
    for s, cm in enumerate(cs.stages):
        print(f"\n[stage {s}: layers {part.stages[s][0]}..{part.stages[s][1] - 1}, devices "
              f"{part.devices_of(s)[0]}..{part.devices_of(s)[-1]}, per device]")
        print(kv_table(budget_rows(cm.budget.to_dict())))
    print(f"\nwrote {args.out}" + (f" and {args.asm}" if args.asm else ""))
    return 0


def simulate_system_cmd(args: argparse.Namespace, system, db, source: str) -> int:
    """``simulate`` on a system: candidates, the chosen partition, its communication."""
    from autosched.compiler.system_figures import simulate_system_model

    f, _ = simulate_system_model(args.model, system, db=db, phase=args.phase,
                                 batch=args.batch, context=args.context,
                                 placement=args.placement,
                                 partition=partition_arg(args.partition, args.model, system))
    if args.json:
        print_json({**f.to_dict(), "schedules_from": source})
        return 0
    print(f"schedules from {source}")
    top = [c for c in f.candidates if c["fits"]][:5]
    print(table(["tp", "pp", "devices", "estimate us", "GB per device"],
                [[c["tp"], c["pp"], c["tp"] * c["pp"], c["estimate_ns"] / 1e3,
                  c["bytes_per_device"] / 1e9] for c in top]))
    print()
    p = f.partition
    print(kv_table([
        ("model", f"{f.model} {f.phase} batch {f.batch} context {f.context} on {f.system}"),
        ("partition", f"tp={p['tp']} pp={p['pp']} ({p['tp'] * p['pp']} devices), stages "
                      + " ".join(f"{a}..{b - 1}" for a, b in p["stages"])),
        ("placement", f.placement),
        ("latency_ns", f.latency_ns), ("bound_ns", f.bound_ns),
        ("latency / bound", f.latency_ns / f.bound_ns),
        ("communication", f"{f.comm_ns:,.0f} ns in flight, {100 * f.comm_share:.1f} % of "
                          f"the step; {f.link_bytes / 1e6:.2f} MB over the links"),
        ("tokens_per_s", f.tokens_per_s), ("sim_wall_s", f.sim_wall_s),
    ]))
    for s, b in enumerate(f.budgets):
        print(f"\n[stage {s}, per device]")
        print(kv_table(budget_rows(b)))
    return 0


