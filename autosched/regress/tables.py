"""The README's tables, printed from case results (the same figures the suite gates).

``experiments/bench_models.py --markdown`` and ``experiments/bench_sim.py --markdown``
print these; the README states those commands above each table.
"""

from __future__ import annotations

from collections.abc import Sequence

from .results import CaseResult

__all__ = ["gemv_table", "markdown", "model_table"]


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
