"""The README's tables, printed from case results (the same figures the suite gates).

``experiments/bench_models.py --markdown``, ``experiments/bench_sim.py --markdown`` and
``experiments/bench_kernels.py`` print these; the README states those commands above each
table.
"""

from __future__ import annotations

from collections.abc import Sequence

from .handoff import Handoff, kernels_ns
from .results import CaseResult

__all__ = ["gemv_table", "handoff_tables", "markdown", "model_table"]


def markdown(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A GitHub-flavoured markdown table of already formatted cells."""
    out = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def _parts(case: str) -> list[str]:
    return case.split("/")


def model_table(results: Sequence[CaseResult]) -> str:
    """Whole-model rows: latency, bound, their ratio, plain-memory baseline, speedup, tokens/s."""
    rows = []
    for r in results:
        model, hw = _parts(r.case)[:2]
        f, i = r.figures, r.info
        rows.append([model, hw, f"{f['latency_ns'] / 1e3:,.1f}", f"{f['bound_ns'] / 1e3:,.1f}",
                     f"{i['latency_over_bound']:.2f}", f"{f['baseline_ns'] / 1e3:,.1f}",
                     f"{i['speedup_vs_baseline']:.2f}", f"{i['tokens_per_s']:,.1f}"])
    return markdown(["model", "hw", "latency µs", "bound µs", "latency / bound", "baseline µs",
                     "speedup vs baseline", "tokens/s"], rows)


def gemv_table(results: Sequence[CaseResult]) -> str:
    """Library-GEMV rows: latency, bound, ratio, plain-memory baseline, speedup."""
    rows = []
    for r in results:
        _, hw, shape = _parts(r.case)
        nk, b = shape.split("-b")
        f, i = r.figures, r.info
        rows.append([hw, nk, b, f"{f['latency_ns'] / 1e3:.2f}", f"{f['bound_ns'] / 1e3:.2f}",
                     f"{i['latency_over_bound']:.2f}", f"{f['baseline_ns'] / 1e3:.2f}",
                     f"{i['speedup']:.2f}"])
    return markdown(["hw", "N x K", "B", "latency µs", "bound µs", "lat/bound", "baseline µs",
                     "speedup"], rows)


def handoff_tables(handoffs: Sequence[Handoff]) -> str:
    """End to end per step (library kernels, defaults, tuned, tuned and fused, bound; the
    library program's latency names the rows per bank of a grown device, or "does not
    fit" where it cannot be measured; then the sums of
    the kernels alone), then every operator that has a library kernel: library, default,
    tuned, what is used."""
    ends, ops = [], []
    for h in handoffs:
        model, hw = h.case.split("/")[:2]
        lat = {k: getattr(h, k).figures.get("latency_ns") for k in ("library", "default",
                                                                    "tuned", "fused")}
        fmt = {k: "does not fit" if v is None else f"{v / 1e3:,.1f}" for k, v in lat.items()}
        if rows_grown := h.library.info.get("rows_per_bank"):
            fmt["library"] += f" ({int(rows_grown)} rows per bank)"
        ends.append([model, hw, *fmt.values(), f"{h.tuned.figures['bound_ns'] / 1e3:,.1f}",
                     "-" if h.speedup is None else f"{h.speedup:.2f}",
                     f"{kernels_ns(h.library) / 1e3:,.1f}", f"{kernels_ns(h.tuned) / 1e3:,.1f}",
                     f"{h.kernel_speedup:.2f}", len(h.slower_ops())])
        ops += [[model, hw, "/".join(o.roles), o.count, f"{o.library_ns / 1e3:.2f}",
                 f"{o.default_ns / 1e3:.2f}", f"{o.tuned_ns / 1e3:.2f}",
                 f"{o.tuned_ns / o.library_ns:.2f}", o.uses]
                for o in h.ops if o.library_ns is not None]
    first = markdown(["model", "hw", "library µs", "default µs", "tuned µs", "tuned+fused µs",
                      "bound µs", "library / tuned", "kernels alone: library µs",
                      "kernels alone: tuned µs", "kernels alone: library / tuned",
                      "operators slower than library"], ends)
    second = markdown(["model", "hw", "operator", "count", "library µs", "default µs",
                       "tuned µs", "tuned / library", "tuned program uses"], ops)
    return first + "\n\n" + second
