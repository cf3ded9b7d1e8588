"""Small printing helpers shared by the commands: aligned tables and JSON."""

from __future__ import annotations

import json
from collections.abc import Sequence


def print_json(obj: object) -> None:
    print(json.dumps(obj, indent=2, sort_keys=False))


def fmt(v: object) -> str:
    if isinstance(v, float):
        if v == 0:
            return "0"
        if abs(v) >= 1e5 or abs(v) < 1e-3:
            return f"{v:.3e}"
        return f"{v:,.3f}".rstrip("0").rstrip(".") if abs(v) < 100 else f"{v:,.1f}"
    return str(v)


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A plain aligned text table (numbers right-aligned)."""
    cells = [[fmt(c) for c in r] for r in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    num = [bool(rows) and all(isinstance(r[i], int | float) for r in rows)
           for i in range(len(headers))]

    def line(vals: Sequence[str]) -> str:
        cols = zip(vals, widths, num, strict=True)
        return "  ".join(v.rjust(w) if n else v.ljust(w) for v, w, n in cols).rstrip()
    out = [line(list(headers)), line(["-" * w for w in widths])]
    out += [line(r) for r in cells]
    return "\n".join(out)


def kv_table(pairs: Sequence[tuple[str, object]]) -> str:
    w = max(len(k) for k, _ in pairs)
    return "\n".join(f"{k.ljust(w)}  {fmt(v)}" for k, v in pairs)
