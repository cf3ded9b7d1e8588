"""``autosched compile``, ``simulate`` and ``run``: whole models on the simulated device.

All three read tuned schedules from ``--db``, by default the database ``tune`` writes
(``autosched.db``) when it exists, and say which schedule each operator used: exact
(tuned for it), nearest (tuned for a similar shape) or default; ``--schedules library``
builds the hand-kernel baseline instead (each family's shipped library kernel, its default
where the library has none). ``--hw`` names a system (``sim.system``; a device is the
system of one): the model is partitioned over its devices (``--partition TPxPP``, or the
searched best; ``1x1`` on one device) and the communication share reported.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from sim.errors import AutoschedError

from ..defaults import DB_DEFAULT
from .checks import output_file, positive, write_atomic
from .lookup_cmd import open_existing
from .numbers import integer
from .output import kv_table, print_json, table
from .steps import (
    QUANTIZE_HELP,
    ROUTING_HELP,
    budget_rows,
    partition_arg,
    resolve_partition,
    resolve_step,
)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, metavar="NAME|config.json")
    p.add_argument("--hw", default="hbm-pim", metavar="NAME|FILE")
    p.add_argument("--quantize", default=None, metavar="w8|w4g128",
                   help=QUANTIZE_HELP)
    p.add_argument("--db", default=None, metavar="PATH|URL",
                   help=f"tuned-schedule database (default: {DB_DEFAULT} if it exists); "
                        "'none' for the default schedules")
    p.add_argument("--schedules", choices=("tuned", "library"), default="tuned",
                   help="tuned: the database's (each family's default where it has none); "
                        "library: the shipped library kernels wherever the library has one "
                        "(the hand-kernel baseline; the database is not read)")


def _step(p: argparse.ArgumentParser) -> None:
    p.add_argument("--phase", choices=("decode", "prefill"), default="decode")
    p.add_argument("--batch", type=integer("--batch"), default=1)
    p.add_argument("--context", type=integer("--context"), default=None,
                   help="KV positions (prompt if prefill)")
    p.add_argument("--placement", choices=("auto", "pim", "host"), default=None,
                   help="operators where tuned (auto), all in the banks, or all on the host "
                        "(default: the plan recorded in --db, else auto)")
    p.add_argument("--partition", default=None, metavar="TPxPP",
                   help="devices per stage x stages on a multi-device system "
                        "(default: the fastest that fits)")
    p.add_argument("--routing", default=None, metavar="FILE", help=ROUTING_HELP)


def register(sub: argparse._SubParsersAction) -> None:
    c = sub.add_parser("compile", help="emit the program of one model step")
    _common(c)
    _step(c)
    c.add_argument("-o", "--out", required=True, metavar="prog.json")
    c.add_argument("--asm", default=None, metavar="prog.s")
    c.set_defaults(run=_compile)
    s = sub.add_parser("simulate", help="time one model step on the cycle-level simulator")
    _common(s)
    _step(s)
    s.add_argument("--json", action="store_true")
    s.set_defaults(run=_simulate)
    r = sub.add_parser("run", help="greedy generation on the functional simulator")
    _common(r)
    r.add_argument("--check", action="store_true", help="compare every step with torch")
    r.add_argument("--steps", type=integer("--steps"), default=8)
    r.add_argument("--seed", type=integer("--seed"), default=0,
                   help="seed of the model's random weights")
    r.add_argument("--partition", default=None, metavar="TPxPP",
                   help="devices per stage x stages on a multi-device system")
    r.add_argument("--json", action="store_true")
    r.add_argument("--record-routing", default=None, metavar="FILE",
                   help="a mixture of experts: write how often each layer's router chose "
                        "each expert over the generated tokens (the file --routing reads)")
    r.set_defaults(run=_run)


def schedule_db(where: str | None):
    """(database or None, how to name it): ``--db`` given, else ``autosched.db`` if present."""
    if where is None:
        if not Path(DB_DEFAULT).exists():
            return None, f"no database ({DB_DEFAULT} does not exist)"
        where = DB_DEFAULT
    if where == "none":
        return None, "no database (--db none)"
    return open_existing(where), where


def schedule_source(args: argparse.Namespace) -> tuple[object, str, dict]:
    """(database or None, how to name the source, further compiler keywords) for ``--db``
    and ``--schedules``."""
    if args.schedules == "library":
        return None, "the library kernels (--schedules library)", {"schedules": "library"}
    return (*schedule_db(args.db), {})


def schedule_report(choices: dict, graph, source: str) -> list[str]:
    """One line of counts, then one line per distinct workload: kind, workload, roles."""
    counts: dict[str, int] = {}
    rows: dict[str, list] = {}
    for n in graph:
        res = choices[n.name]
        counts[res.kind] = counts.get(res.kind, 0) + 1
        row = rows.setdefault(n.workload.key, [res, []])
        if n.role and n.role not in row[1]:
            row[1].append(n.role)
    head = f"schedules from {source}: " + ", ".join(
        f"{counts[k]} {k}" for k in ("exact", "nearest", "library", "default", "given",
                                        "fitted", "pim", "host")
        if k in counts)
    lines = [head]
    for wkey, (res, roles) in rows.items():
        extra = f" (from {res.source.workload.key})" if res.kind == "nearest" else ""
        note = f"; {res.stale_note}" if res.stale_note else ""
        lines.append(f"  {res.kind:<8} {wkey} [{', '.join(roles)}]{extra}{note}")
    return lines


def host_ops_line(host_ops: dict[str, tuple[str, ...]]) -> str:
    """One line: the ops no operator family covers (run on the host, cost counted), or none."""
    if not host_ops:
        return "host ops (no operator family covers them): none"
    return "host ops (no operator family covers them, run on the host): " + "; ".join(
        f"{fn} x{len(nodes)} ({', '.join(nodes[:3])}{', ...' if len(nodes) > 3 else ''})"
        for fn, nodes in host_ops.items())


def _check_step(args: argparse.Namespace) -> None:
    positive(args.batch, "--batch")
    positive(args.context, "--context")


def _stage_lines(part, budgets: list[dict]) -> list[str]:
    """Per stage: its layers, its devices and one device's memory plan."""
    lines = []
    for s, b in enumerate(budgets):
        first, end = part.stages[s]
        devs = part.devices_of(s)
        lines.append(f"\n[stage {s}: layers {first}..{end - 1}, devices {devs[0]}..{devs[-1]}, "
                     "per device]")
        lines.append(kv_table(budget_rows(b)))
    return lines


def _compile(args: argparse.Namespace) -> int:
    from autosched.compiler import compile_step
    from autosched.compiler.capacity import max_batch
    from autosched.families import host_ops

    _check_step(args)
    out = output_file(args.out, "-o", force=True)  # a program file is rewritten (atomically)
    asm = output_file(args.asm, "--asm", force=True) if args.asm else None
    db, source, kw = schedule_source(args)
    step, system = resolve_step(args)
    part = resolve_partition(args.partition, step, system)
    cs = compile_step(step, system, partition=part, db=db, placement=args.placement, **kw)
    write_atomic(out, lambda p: p.write_text(cs.program.to_json()))
    if asm is not None:
        write_atomic(asm, lambda p: p.write_text(cs.program.to_asm()))
    streams = sum(len(st.program.streams) for st in cs.stages)
    print(f"{cs.name} {cs.graph.phase} on {system.name}: {part.describe()}, "
          f"{len(cs.graph)} operators per device, {len(cs.program.groups)} device groups, "
          f"{streams} streams, placement {cs.placement}")
    if cs.plans_from:
        print(cs.plans_from)
    print("\n".join(schedule_report(cs.choices, cs.graph, source)))
    print(host_ops_line(host_ops(cs.graph)))
    _weights_line(cs.graph, system.device)
    print("\n".join(_stage_lines(part, [st.budget.to_dict() for st in cs.stages])))
    print(kv_table([(f"max_batch at context {cs.graph.context}",
                     min(max_batch(st) for st in cs.stages))]))
    print(f"wrote {args.out}" + (f" and {args.asm}" if args.asm else ""))
    return 0


def _simulate(args: argparse.Namespace) -> int:
    from autosched.compiler import simulate_step

    _check_step(args)
    db, source, kw = schedule_source(args)
    step, system = resolve_step(args)
    f = simulate_step(step, system, db=db, placement=args.placement,
                      partition=partition_arg(args.partition, step, system), **kw)
    if args.json:
        print_json({**f.to_dict(), "schedules_from": source})
        return 0
    counts = ", ".join(f"{n} {k}" for k, n in sorted(f.lookups.items()))
    print(f"schedules from {source}: {counts}")
    if f.plans_from:
        print(f.plans_from)
    from autosched.pipeline import step_graph

    _weights_line(step_graph(step), system.device)
    print(host_ops_line(f.host_ops))
    rows = [[o["role"], o["workload"], o["count"], o["latency_ns"], o["bound_ns"], o["lookup"]]
            for o in f.ops]
    print(table(["role", "workload", "count", "latency ns", "bound ns", "schedule"], rows))
    if len(f.candidates) > 1:
        top = [c for c in f.candidates if c["fits"]][:5]
        print()
        print(table(["tp", "pp", "devices", "estimate us", "GB per device"],
                    [[c["tp"], c["pp"], c["tp"] * c["pp"], c["estimate_ns"] / 1e3,
                      c["bytes_per_device"] / 1e9] for c in top]))
    print()
    p = f.partition
    print(kv_table([
        ("model", f"{f.model} {f.phase} batch {f.batch} context {f.context} on {f.hardware}"),
        ("partition", f"tp={p['tp']} pp={p['pp']} ({p['tp'] * p['pp']} devices), stages "
                      + " ".join(f"{a}..{b - 1}" for a, b in p["stages"])),
        ("placement", f.placement),
        ("latency_ns", f.latency_ns), ("bound_ns", f.bound_ns),
        ("latency / bound", f.latency_ns / f.bound_ns), ("baseline_ns", f.baseline_ns),
        ("speedup vs baseline", f.baseline_ns / f.latency_ns),
        ("communication", f"{f.comm_ns:,.0f} ns in flight, {100 * f.comm_share:.1f} % of "
                          f"the step; {f.link_bytes / 1e6:.2f} MB over the links"),
        ("tokens_per_s", f.tokens_per_s), ("energy_per_token_pj", f.energy_per_token_pj),
        (f"max_batch at context {f.context}", f.max_batch), ("sim_wall_s", f.sim_wall_s),
    ]))
    from autosched.compiler import Partition

    part = Partition(p["tp"], tuple(tuple(s) for s in p["stages"]), bool(p.get("experts")))
    print("\n".join(_stage_lines(part, list(f.budgets))))
    return 0


def _weights_line(graph, hw) -> None:
    from autosched.frontend.quantized import weights_line

    line = weights_line(graph, hw)
    if line:
        print(line)


def _run(args: argparse.Namespace) -> int:
    from autosched.compiler import compile_step, run_check

    positive(args.steps, "--steps")
    db, source, kw = schedule_source(args)
    step, system = resolve_step(args, phase="decode", batch=1, context=args.steps)
    record = args.record_routing and output_file(args.record_routing, "--record-routing",
                                                 force=True, protect=(args.db or "",))
    if record and not step.model.experts:
        raise AutoschedError(f"--record-routing: {step.model.name} has no routed experts")
    part = resolve_partition(args.partition, step, system)
    rep = run_check(args.model, system, partition=part, steps=args.steps, db=db,
                    seed=args.seed, quantize=args.quantize, **kw)
    # the same first compile run_check made (its kernels are cached): which schedules
    first = compile_step(step, system, partition=part, db=db, **kw)
    lines = schedule_report(first.choices, first.graph, source)
    lines.append(f"  {part.describe()} on {system.name}")
    if args.json:
        print_json({**rep.to_dict(), "schedules_from": source, "plans_from": first.plans_from,
                    "schedules": lines[1:]})
    else:
        print("\n".join(lines[:1] + [first.plans_from] * bool(first.plans_from) + lines[1:]))
        _weights_line(first.graph, system.device)
        print(table(["step", "token", "torch", "max abs err", "max rel err"],
                    [[r["step"], r["token"], r["ref_token"], r["max_abs_err"], r["max_rel_err"]]
                     for r in rep.steps]))
        verdict = "PASS" if rep.passed else "FAIL"
        print(f"\n{verdict}: max rel err {rep.max_rel_err:.3g} (tolerance {rep.tolerance:.3g}), "
              f"tokens {'match' if rep.tokens_match else 'differ'}, {rep.wall_s:.1f} s")
        if rep.fp16_max_rel_err is not None:
            print(f"against the float model (what {args.quantize} costs): max rel err "
                  f"{rep.fp16_max_rel_err:.3g}")
    if record:  # the tokens the run fed: the first, then each step's but the last
        from autosched.families.moe.record import record_routing

        fed = [1] + [int(r["token"]) for r in rep.steps][:-1]
        data = record_routing(args.model, fed, record, seed=args.seed)
        if not args.json:
            print(f"routing over {len(fed)} tokens in {len(data['layers'])} layers written "
                  f"to {record}")
    if args.check and not rep.passed:
        return 1
    return 0
