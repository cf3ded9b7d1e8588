"""``autosched lookup --op OP --shape k=v,...``: the schedule compile would use, and why."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from sim.errors import AutoschedError

from ..defaults import DB_DEFAULT
from .numbers import WORKLOAD_DTYPES
from .numbers import dims as shape_dims
from .output import kv_table, print_json


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("lookup", help="the schedule of one workload: exact, nearest or default")
    p.add_argument("--op", required=True, help="operator family (gemv, attention, rmsnorm...)")
    p.add_argument("--shape", required=True, metavar="k=v,...",
                   help="every dim of the family, e.g. m=1,n=4096,k=4096")
    p.add_argument("--dtype", choices=WORKLOAD_DTYPES, default="fp16",
                   help="the model's number type (fp16 or bf16)")
    p.add_argument("--attr", action="append", default=[], metavar="k=v",
                   help="workload attribute (repeatable), e.g. --attr fn=silu")
    p.add_argument("--hw", default="hbm-pim", metavar="NAME|FILE")
    p.add_argument("--db", default=DB_DEFAULT, metavar="PATH|URL")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(run=_run)


def parse_pairs(text: str, what: str) -> dict[str, str]:
    """``"a=1,b=x"`` -> {"a": "1", "b": "x"}; raises naming a malformed or repeated item."""
    out: dict[str, str] = {}
    for item in (s.strip() for s in text.split(",")):
        if not item:
            continue
        key, sep, val = item.partition("=")
        if not sep or not key.strip() or not val.strip():
            raise AutoschedError(f"{what} item {item!r} is not key=value")
        if key.strip() in out:
            raise AutoschedError(f"{what} names {key.strip()!r} twice")
        out[key.strip()] = val.strip()
    return out


def _value(v: str) -> str | int | float:
    for conv in (int, float):
        try:
            return conv(v)
        except ValueError:
            pass
    return v


def workload_from_args(op: str, shape: str, dtype: str, attrs: list[str]):
    """The Workload named on the command line (dims must be integers)."""
    from search_spaces import Workload

    dims = shape_dims("--shape", parse_pairs(shape, "--shape"))
    attr: dict[str, str | int | float] = {}
    for a in attrs:
        for k, v in parse_pairs(a, "--attr").items():
            if k in attr:
                raise AutoschedError(f"--attr names {k!r} twice")
            attr[k] = _value(v)
    return Workload.make(op, dtype, attr or None, **dims)


def open_existing(where: str):
    """Open a database that must already exist, read-only: a missing or empty file, a
    folder or a device is an error, and nothing is ever written (no schema either)."""
    from ..database import open_database

    return open_database(where, readonly=True)


def _run(args: argparse.Namespace) -> int:
    from sim.hwio import load_hardware

    from ..lookup import lookup

    hw = load_hardware(args.hw)
    w = workload_from_args(args.op, args.shape, args.dtype, args.attr)
    missing = "://" not in args.db and not os.path.lexists(Path(args.db).expanduser())
    res = lookup(None if missing else open_existing(args.db), w, hw)
    if args.json:
        print_json({**res.to_dict(), "hardware": hw.name, "db": args.db})
        return 0
    why = {"exact": "tuned for this workload",
           "nearest": f"tuned for {res.source.workload.key if res.source else '?'}, "
                      "re-validated for this shape",
           "default": "no usable tuned schedule" + (f" (no database at {args.db})"
                                                    if missing else "")}[res.kind]
    if res.stale_note:
        why += f"; {res.stale_note}"
    pairs: list[tuple[str, object]] = [("workload", w.key), ("hardware", hw.name),
                                       ("lookup", f"{res.kind}: {why}"),
                                       ("space", f"{res.schedule.space} v{res.schedule.version}")]
    if res.source is not None:
        label = "measured ns" if res.kind == "exact" else "measured ns there"
        pairs.append((label, res.source.latency_ns))
    pairs += [(f"  {k}", v) for k, v in res.schedule.params]
    print(kv_table(pairs))
    return 0
