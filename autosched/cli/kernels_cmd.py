"""``autosched kernels``: the compiler against the shipped library kernels, per operator.

Prints, per distinct operator of one model step: the library kernel's latency, the
compiler's default, the tuned schedule (from ``--db``: a tuning database or a
tuned-schedule export; by default ``autosched.db`` when it exists, else every family's
default), the bound, which one the tuned program uses and why; then the step end to end
on the library kernels, the defaults, the tuned schedules and the tuned fused plan.
Every input (model, hardware, the schedule source and its answer for every operator) is
checked before anything is measured.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from sim.timing.decompose import PARTS

from .numbers import integer
from .output import kv_table, print_json, table
from .steps import QUANTIZE_HELP


def register(sub: argparse._SubParsersAction) -> None:
    from autosched.defaults import DB_DEFAULT, DEFAULT_CONTEXT

    p = sub.add_parser("kernels", help="compiler vs hand-written library kernels, per operator")
    p.add_argument("--model", required=True, metavar="NAME|config.json")
    p.add_argument("--hw", default="hbm-pim", metavar="NAME|FILE")
    p.add_argument("--quantize", default=None, metavar="w8|w4g128",
                   help=QUANTIZE_HELP)
    p.add_argument("--phase", choices=("decode", "prefill"), default="decode")
    p.add_argument("--batch", type=integer("--batch"), default=1)
    p.add_argument("--context", type=integer("--context"), default=DEFAULT_CONTEXT,
                   help=f"KV positions (prompt if prefill); default {DEFAULT_CONTEXT}")
    p.add_argument("--db", default=None, metavar="PATH|URL|export.json",
                   help=f"tuning database or tuned-schedule export (default: {DB_DEFAULT} if "
                        "it exists, else each family's default schedule); 'none' for the "
                        "default schedules")
    p.add_argument("--tuned", dest="db", metavar="PATH|URL|export.json",
                   help=argparse.SUPPRESS)  # the former name of --db
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=_run)


def _us(v: float | None) -> object:
    return "-" if v is None else v / 1e3


def _source(db: str | None):
    """(schedule source, how to name it) for ``--db``."""
    from autosched.defaults import DB_DEFAULT
    from autosched.regress.sources import DatabaseSchedules
    from autosched.regress.tuned import open_schedules

    if db == "none":
        return DatabaseSchedules(None), "the default schedules (--db none)"
    if db is None:
        if not Path(DB_DEFAULT).exists():
            return DatabaseSchedules(None), f"the default schedules (no {DB_DEFAULT})"
        db = DB_DEFAULT
    return open_schedules(db), db


def _run(args: argparse.Namespace) -> int:
    from autosched.pipeline import model_graph
    from autosched.regress import Runner
    from autosched.regress.cases import ModelCase
    from autosched.regress.handoff import handoff, tuned_choices
    from sim.hwio import load_hardware

    hw = load_hardware(args.hw)
    # the model as the hand-off's cases resolve it, so both read the same graph
    cfg = ModelCase(args.model, args.hw, quantize=args.quantize).config()
    source, where = _source(args.db)
    graph = model_graph(cfg, phase=args.phase, batch=args.batch, context=args.context)[1]
    # an export lacking a workload, a foreign database: refused before anything runs
    choices = tuned_choices(source, graph, hw)
    h = handoff(args.model, args.hw, runner=Runner(repeats=1, tuned=source),
                phase=args.phase, batch=args.batch, context=args.context,
                quantize=args.quantize)
    parts = _decomposition(h, choices, hw)
    if args.json:
        print_json({**h.to_dict(), "schedules_from": where, "decomposition": parts})
        return 0
    print(f"tuned schedules from {where}")
    rows = [["/".join(o.roles), o.workload, o.count, _us(o.library_ns), _us(o.default_ns),
             _us(o.tuned_ns), _us(o.bound_ns),
             "-" if o.library_ns is None else o.tuned_ns / o.library_ns, o.uses, o.why]
            for o in h.ops]
    print(table(["roles", "workload", "count", "library µs", "default µs", "tuned µs",
                 "bound µs", "tuned/library", "uses", "why"], rows))
    print()
    print("where each tuned kernel's time goes (ablation: each cost made free in turn)")
    print(table(["workload", "tuned µs", "bound µs", "tuned/bound", *(
        f"{p} µs" for p in PARTS)], [[d["workload"], _us(d["latency"]), _us(d["bound"]),
                                      d["latency"] / d["bound"] if d["bound"] else "-",
                                      *(_us(d[p]) for p in PARTS)] for d in parts]))
    print()
    print(kv_table(_summary(h)))
    return 0


def _decomposition(h, choices: dict, hw) -> list[dict]:
    """Per distinct operator, its tuned schedule's latency split by
    ``Family.decompose``, beside its bound (``choices``: workload key -> lookup result,
    on the workload as compiled)."""
    from autosched.families import family_of

    out = []
    for o in h.ops:
        c = choices.get(o.workload)
        if c is None:
            continue
        d = family_of(c.workload).decompose(c.workload, c.schedule.point, hw)
        out.append({"workload": o.workload, "bound": o.bound_ns, **d})
    return out


def _summary(h) -> list[tuple[str, object]]:
    """The step end to end: the four programs (the library one may not link), the sums of
    the kernels alone, the ratios."""
    from autosched.regress.handoff import kernels_ns

    lat = {k: getattr(h, k).figures.get("latency_ns") for k in ("library", "default",
                                                                "tuned", "fused")}
    lib = "-" if h.library.ok else f"cannot be linked: {h.library.error}"
    rows = [("step", h.case),
            ("library kernels µs", _us(lat["library"]) if h.library.ok else lib),
            ("defaults µs", _us(lat["default"])), ("tuned µs", _us(lat["tuned"])),
            ("tuned, fused µs", _us(lat["fused"])),
            ("bound µs", _us(h.tuned.figures["bound_ns"]))]
    if rows_grown := h.library.info.get("rows_per_bank"):
        rows.insert(2, ("library program's device", f"{int(rows_grown)} rows per bank: the "
                        "preset cannot hold the library layout; timing unchanged"))
    if h.speedup is not None:
        rows += [("library / tuned", h.speedup),
                 ("library / tuned, fused", lat["library"] / lat["fused"])]
    rows += [("kernels alone, library µs", _us(kernels_ns(h.library))),
             ("kernels alone, tuned µs", _us(kernels_ns(h.tuned))),
             ("kernels alone, library / tuned", h.kernel_speedup),
             ("operators slower than the library", len(h.slower_ops()))]
    return rows
