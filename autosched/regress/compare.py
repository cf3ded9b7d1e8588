"""Compare measured cases with the baseline: exact on simulated figures, a band on wall time.

A gated figure (latency, energy, bound, plain-memory baseline; of each case and of each
operator) that differs from the baseline at all is a change, unless an ``expected`` entry
of the baseline allows it (then its verdict is ``expected`` and its reason is shown).
Case verdicts: ``ok``, ``expected``; and the failing ones ``regressed`` (something got
slower or costlier), ``improved`` (only faster or cheaper: the baseline is stale and must
be updated with a reason), ``changed`` (a bound moved, an operator appeared or vanished),
``new`` (no baseline yet), ``gone`` (in the baseline, not in the suite), ``error``.
Wall-clock medians outside the band (``now / before`` above ``band`` or below
``1 / band``) are flagged ``slower``/``faster`` and never fail.
"""

from __future__ import annotations

from dataclasses import dataclass

from .baseline import Baseline
from .results import GATED, CaseResult

__all__ = ["FAILING", "CaseVerdict", "Change", "Report", "compare"]

FAILING = ("regressed", "improved", "changed", "new", "gone", "error")
_WORSE_UP = ("latency_ns", "energy_pj", "baseline_ns")


@dataclass(frozen=True)
class Change:
    """One gated figure that moved: of the case (``op`` None) or of one operator."""

    case: str
    op: str | None
    label: str
    metric: str
    before: float | None
    now: float | None
    verdict: str  # worse | better | changed | expected
    reason: str = ""

    @property
    def rel(self) -> float | None:
        if self.before is None or self.now is None or self.before == 0:
            return None
        return self.now / self.before - 1

    def describe(self) -> str:
        """``latency +6.30% (745.504 -> 792.504)``, or that the figure appeared or vanished."""
        name = self.metric.removesuffix("_ns").removesuffix("_pj")
        if self.rel is not None:
            return f"{name} {self.rel:+.2%} ({self.before:.6g} -> {self.now:.6g})"
        return f"{name} {'appeared' if self.before is None else 'vanished'}"

    def to_dict(self) -> dict:
        return {"op": self.op, "label": self.label, "metric": self.metric,
                "before": self.before, "now": self.now, "rel": self.rel,
                "verdict": self.verdict, "reason": self.reason}


@dataclass(frozen=True)
class CaseVerdict:
    """The verdict on one case, its moved figures and its wall-clock flags."""

    case: str
    verdict: str
    before: CaseResult | None
    now: CaseResult | None
    changes: tuple[Change, ...] = ()
    wall: tuple[tuple[str, float, float, str], ...] = ()  # (metric, before, now, flag)

    @property
    def failed(self) -> bool:
        return self.verdict in FAILING

    @property
    def moved_ops(self) -> list[Change]:
        """Operator figures that moved without an expected-change entry."""
        return [c for c in self.changes if c.op is not None and c.verdict != "expected"]

    def to_dict(self) -> dict:
        return {"case": self.case, "verdict": self.verdict,
                "error": self.now.error if self.now is not None else "",
                "changes": [c.to_dict() for c in self.changes],
                "wall": [{"metric": m, "before": b, "now": n, "flag": f}
                         for m, b, n, f in self.wall]}


@dataclass(frozen=True)
class Report:
    """Every case's verdict; ``failed`` when any case has a failing verdict."""

    suite: str
    verdicts: tuple[CaseVerdict, ...]
    band: float

    @property
    def failed(self) -> bool:
        return any(v.failed for v in self.verdicts)

    def failing(self) -> list[CaseVerdict]:
        return [v for v in self.verdicts if v.failed]

    def summary(self) -> str:
        """Per failing case: its verdict and own figures that moved, then one line per
        operator that moved with each of its figures."""
        lines = []
        for v in self.failing():
            if v.verdict == "error":
                lines.append(f"{v.case}: error: {v.now.error if v.now is not None else ''}")
                continue
            if v.verdict in ("new", "gone"):
                what = "no baseline figures" if v.verdict == "new" else "not measured"
                lines.append(f"{v.case}: {v.verdict}: {what}")
                continue
            live = [c for c in v.changes if c.verdict != "expected"]
            own = ", ".join(c.describe() for c in live if c.op is None)
            lines.append(f"{v.case}: {v.verdict}" + (f": {own}" if own else ""))
            by_op: dict[str, list[Change]] = {}
            for c in v.moved_ops:
                by_op.setdefault(c.label, []).append(c)
            lines += [f"  {label}: " + ", ".join(c.describe() for c in cs)
                      for label, cs in by_op.items()]
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return {"suite": self.suite, "failed": self.failed, "wall_band": self.band,
                "cases": [v.to_dict() for v in self.verdicts]}


def _direction(metric: str, before: float, now: float) -> str:
    if metric in _WORSE_UP:
        return "worse" if now > before else "better"
    return "changed"


def _figure_changes(base: Baseline, case: str, op: str | None, label: str,
                    before: dict[str, float], now: dict[str, float]) -> list[Change]:
    out = []
    for metric in [m for m in GATED if m in before or m in now]:
        b, n = before.get(metric), now.get(metric)
        if b == n:
            continue
        allow = base.allowance(case, op, metric)
        if allow is not None and b is not None and n is not None and b != 0 \
                and abs(n / b - 1) <= allow.tolerance:
            out.append(Change(case, op, label, metric, b, n, "expected", allow.reason))
        else:
            verdict = _direction(metric, b, n) if b is not None and n is not None else "changed"
            out.append(Change(case, op, label, metric, b, n, verdict))
    return out


def _changes(base: Baseline, before: CaseResult, now: CaseResult) -> list[Change]:
    out = _figure_changes(base, now.case, None, "", before.figures, now.figures)
    for o in now.ops:
        was = before.op(o.workload)
        out += _figure_changes(base, now.case, o.workload, o.label,
                               was.figures if was else {}, o.figures)
    for was in before.ops:
        if now.op(was.workload) is None:
            out += _figure_changes(base, now.case, was.workload, was.label, was.figures, {})
    return out


def _verdict(changes: list[Change]) -> str:
    live = [c for c in changes if c.verdict != "expected"]
    if not live:
        return "expected" if changes else "ok"
    if any(c.verdict == "worse" for c in live):
        return "regressed"
    if all(c.verdict == "better" for c in live):
        return "improved"
    return "changed"


def _wall(before: CaseResult, now: CaseResult, band: float) -> tuple:
    out = []
    for m, n in now.wall.items():
        b = before.wall.get(m)
        if b is None or b <= 0:
            continue
        r = n / b
        out.append((m, b, n, "slower" if r > band else "faster" if r < 1 / band else ""))
    return tuple(out)


def compare(base: Baseline, results: list[CaseResult], *, band: float = 1.5,
            suite_ids: set[str] | None = None) -> Report:
    """Verdicts of ``results`` against ``base``. Baseline cases outside ``suite_ids`` (the
    suite's whole case list, measured or filtered out) are reported ``gone``."""
    verdicts = []
    for now in results:
        before = base.cases.get(now.case)
        if not now.ok:
            verdicts.append(CaseVerdict(now.case, "error", before, now))
        elif before is None:
            verdicts.append(CaseVerdict(now.case, "new", None, now))
        else:
            ch = _changes(base, before, now)
            verdicts.append(CaseVerdict(now.case, _verdict(ch), before, now, tuple(ch),
                                        _wall(before, now, band)))
    if suite_ids is not None:
        verdicts += [CaseVerdict(cid, "gone", base.cases[cid], None)
                     for cid in sorted(set(base.cases) - suite_ids)]
    return Report(base.suite, tuple(verdicts), band)
