"""The history of a suite: one JSON line per run, with the commit it measured, and its plot.

``data/history-<suite>.jsonl`` (or any path) gains a line per ``autosched regress`` run:
time, commit and whether the checkout had uncommitted changes, the suite version, the
verdict (``pass``, ``fail``, ``update``) and per case the gated figures and the
wall-clock medians. Lines are appended under a lock; a line cut short by a killed writer
is skipped when reading. :func:`plot_history` draws one panel per case.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

from sim.errors import AutoschedError
from sim.files import parse_json, read_text
from sim.writes import write_atomic

from .files import MAX_FILE_BYTES, append_line
from .results import CaseResult
from .tuned import DATA_DIR

__all__ = ["append_history", "history_entry", "history_path", "load_history", "plot_history"]


def history_path(suite: str) -> Path:
    """Where the history of ``suite`` is kept by default."""
    return DATA_DIR / f"history-{suite}.jsonl"


def history_entry(suite: str, suite_version: int, results: list[CaseResult], verdict: str,
                  commit: dict) -> dict:
    """The line recorded for one run."""
    return {"time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), **commit, "suite": suite,
            "suite_version": suite_version, "verdict": verdict,
            "cases": {r.case: {**r.figures, **r.wall} for r in results if r.ok}}


def append_history(path: str | Path, entry: dict) -> None:
    append_line(Path(path), json.dumps(entry, sort_keys=True))


def load_history(path: str | Path) -> list[dict]:
    """Every complete entry of ``path`` in order (none when the file does not exist)."""
    p = Path(path)
    if not p.exists() and not p.is_symlink():
        return []
    out = []
    for n, line in enumerate(read_text(p, limit=MAX_FILE_BYTES, what="history").splitlines()):
        try:
            entry = parse_json(line, source=f"{p} line {n + 1}", nan=True)
        except AutoschedError:
            continue  # a line cut short by a killed writer
        if isinstance(entry, dict) and isinstance(entry.get("cases"), dict):
            out.append(entry)
    return out


def _label(e: dict) -> str:
    sha = str(e.get("commit", "unknown"))[:7]
    return sha + ("+" if e.get("dirty") else "")


def plot_history(entries: list[dict], path: str | Path, *, title: str = "") -> Path:
    """One panel per case: simulated latency per run (left axis, µs; tune cases: tune
    time, s) and the compile + simulate wall-clock median (right axis, s). The x axis is
    the run, labelled by its commit (``+``: uncommitted changes)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cases = list(dict.fromkeys(c for e in entries for c in e["cases"]))
    if not cases:
        raise AutoschedError("the history has no entries to plot: run the suite first")
    cols = min(4, len(cases))
    rows = math.ceil(len(cases) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 2.6 * rows), squeeze=False)
    xs = range(len(entries))
    for ax, case in zip(axes.flat, cases, strict=False):
        figs = [e["cases"].get(case, {}) for e in entries]
        key, scale, unit = ("latency_ns", 1e-3, "µs") if any("latency_ns" in f for f in figs) \
            else ("tune_s", 1.0, "s")
        ys = [f[key] * scale if key in f else math.nan for f in figs]
        ax.plot(xs, ys, "o-", color="tab:blue", ms=3)
        ax.set_ylabel(f"{'latency' if key == 'latency_ns' else 'tune'} {unit}", fontsize=7)
        walls = [f.get("compile_s", math.nan) + f.get("simulate_s", 0.0) for f in figs]
        if key == "latency_ns" and any(not math.isnan(w) for w in walls):
            tw = ax.twinx()
            tw.plot(xs, walls, "s--", color="tab:gray", ms=2, lw=0.8)
            tw.set_ylabel("compile+sim s", fontsize=7, color="tab:gray")
            tw.tick_params(labelsize=6, colors="tab:gray")
        ax.set_title(case, fontsize=7)
        every = max(1, math.ceil(len(entries) / 16))
        ax.set_xticks(list(xs)[::every], [_label(e) for e in entries][::every], rotation=60,
                      fontsize=5)
        ax.tick_params(axis="y", labelsize=6)
    for ax in list(axes.flat)[len(cases):]:
        ax.set_visible(False)
    if title:
        fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        write_atomic(out, lambda tmp: fig.savefig(tmp, dpi=110, format=out.suffix[1:] or "png"),
                     what="--plot")
    finally:
        plt.close(fig)
    return out
