"""``autosched db list`` and ``autosched db export``: the tuned-schedule database via pandas."""

from __future__ import annotations

import argparse
import importlib.util
import json
import math

from sim.errors import AutoschedError

from .checks import output_file, write_atomic
from .lookup_cmd import DB_DEFAULT, open_existing

EXPORT_COLUMNS = ("workload", "op", "shape", "dtype", "attrs", "hw_name", "hw_fingerprint",
                  "space", "space_version", "sim_version", "schedule", "latency_ns",
                  "energy_pj", "bound_ns", "error", "created")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("db", help="query and export the tuned-schedule database")
    ds = p.add_subparsers(dest="db_command", required=True, metavar="ACTION")
    ls = ds.add_parser("list", help="one row per workload and hardware: best, count, failures")
    ls.add_argument("--db", default=DB_DEFAULT, metavar="PATH|URL")
    ls.add_argument("--op", default=None, help="only this operator family")
    ls.add_argument("--hw", default=None, metavar="NAME|FILE", help="only this hardware")
    ls.set_defaults(run=_list)
    ex = ds.add_parser("export", help="every measurement to CSV or Parquet")
    ex.add_argument("--db", default=DB_DEFAULT, metavar="PATH|URL")
    fmt = ex.add_mutually_exclusive_group()
    fmt.add_argument("--csv", dest="format", action="store_const", const="csv")
    fmt.add_argument("--parquet", dest="format", action="store_const", const="parquet")
    ex.add_argument("-o", "--output", required=True, metavar="FILE")
    ex.add_argument("--force", action="store_true",
                    help="overwrite an existing file (never a database)")
    ex.set_defaults(run=_export)
    ck = ds.add_parser("check", help="integrity check: the file, unique records, the summary")
    ck.add_argument("--db", default=DB_DEFAULT, metavar="PATH|URL")
    ck.set_defaults(run=_check)


def records_frame(db, *, op: str | None = None, hw_fingerprint: str | None = None):
    """Every matching measurement as a pandas DataFrame, one row each (commit order)."""
    import pandas as pd

    rows = []
    for m in db.records(op=op, hw_fingerprint=hw_fingerprint):
        rows.append({
            "workload": m.workload.key, "op": m.workload.op,
            "shape": json.dumps(m.workload.dims), "dtype": m.workload.dtype,
            "attrs": json.dumps(dict(m.workload.attrs)), "hw_name": m.hw_name,
            "hw_fingerprint": m.hw_fingerprint, "space": m.schedule.space,
            "space_version": m.schedule.version, "sim_version": m.sim_version,
            "schedule": json.dumps(m.schedule.point, sort_keys=True),
            "latency_ns": m.latency_ns if m.ok else math.nan,
            "energy_pj": m.energy_pj if m.ok else math.nan, "bound_ns": m.bound_ns,
            "error": m.error, "created": m.created,
        })
    return pd.DataFrame(rows, columns=list(EXPORT_COLUMNS))


def summary_frame(df):
    """Per (workload, hardware): best latency, measurements, failures, best/bound."""
    import pandas as pd

    cols = ["workload", "hw_name", "best_ns", "bound_ns", "count", "failures"]
    if df.empty:
        return pd.DataFrame(columns=cols)
    g = df.assign(failed=df["error"] != "").groupby(["workload", "hw_name"], sort=True)
    out = g.agg(best_ns=("latency_ns", "min"), bound_ns=("bound_ns", "max"),
                count=("latency_ns", "size"), failures=("failed", "sum")).reset_index()
    return out[cols]


def _list(args: argparse.Namespace) -> int:
    import pandas as pd

    fp = None
    if args.hw is not None:
        from sim.hwio import load_hardware

        fp = load_hardware(args.hw).fingerprint
    summary = summary_frame(records_frame(open_existing(args.db), op=args.op, hw_fingerprint=fp))
    if summary.empty:
        print(f"no measurements in {args.db}" + (" matching the filters"
                                                   if args.op or args.hw else ""))
        return 0
    with pd.option_context("display.width", 200, "display.max_rows", None,
                           "display.max_colwidth", 80):
        print(summary.to_string(index=False))
    return 0


def _export(args: argparse.Namespace) -> int:
    out = output_file(args.output, "-o", force=args.force, protect=(args.db,))
    fmt = args.format or ("parquet" if out.suffix == ".parquet" else "csv")
    if fmt == "parquet" and not (importlib.util.find_spec("pyarrow")
                                 or importlib.util.find_spec("fastparquet")):
        raise AutoschedError("writing Parquet needs pyarrow: `pip install pyarrow`, "
                             "or export with --csv")
    df = records_frame(open_existing(args.db))
    if fmt == "parquet":
        write_atomic(out, lambda p: df.to_parquet(p, index=False))
    else:
        write_atomic(out, lambda p: df.to_csv(p, index=False))
    print(f"{len(df)} measurement(s) written to {args.output}")
    return 0


def _check(args: argparse.Namespace) -> int:
    from ..database import SqlDatabase
    from ..database.check import check_database

    db = open_existing(args.db)
    if not isinstance(db, SqlDatabase):
        raise AutoschedError(f"{args.db}: only SQL databases have an integrity check")
    problems = check_database(db)
    for p in problems:
        print(p)
    print(f"{args.db}: {len(db)} measurement(s), "
          + ("ok" if not problems else f"{len(problems)} problem(s)"))
    return 1 if problems else 0
