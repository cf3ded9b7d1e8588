"""What one measured case yields: gated figures, per-operator figures, wall-clock medians.

* ``figures``: simulated and analytical figures (latency, energy, bound, plain-memory
  baseline). Deterministic, so the baseline compares them exactly.
* ``ops``: the same three figures per distinct operator of a model step (each operator's
  kernel simulated alone), so a move names the operator behind it.
* ``wall``: medians of several timed runs (compile, simulate, tune) in seconds; compared
  within a loose band, never failing.
* ``info``: ratios derived from the figures, for tables; never compared.
* ``error``: a case that could not be measured is a record too (its message).
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["GATED", "CaseResult", "OpFigures"]

GATED = ("latency_ns", "energy_pj", "bound_ns", "baseline_ns")


@dataclass(frozen=True)
class OpFigures:
    """One distinct operator (workload) of a model step and the roles it plays there."""

    workload: str
    roles: tuple[str, ...]
    count: int
    latency_ns: float
    energy_pj: float
    bound_ns: float
    schedule: str

    @property
    def figures(self) -> dict[str, float]:
        return {"latency_ns": self.latency_ns, "energy_pj": self.energy_pj,
                "bound_ns": self.bound_ns}

    @property
    def label(self) -> str:
        """``ffn_down gemv:m=1,n=256,k=688:fp16``: roles, then the workload."""
        return f"{'/'.join(self.roles)} {self.workload}"

    def to_dict(self) -> dict:
        return {"roles": list(self.roles), "count": self.count, **self.figures,
                "schedule": self.schedule}

    @classmethod
    def from_dict(cls, workload: str, d: dict) -> OpFigures:
        return cls(workload, tuple(d["roles"]), int(d["count"]), float(d["latency_ns"]),
                   float(d["energy_pj"]), float(d["bound_ns"]), str(d.get("schedule", "")))


@dataclass(frozen=True)
class CaseResult:
    """The measurement of one case (see the module docstring)."""

    case: str
    kind: str
    figures: dict[str, float] = field(default_factory=dict)
    ops: tuple[OpFigures, ...] = ()
    wall: dict[str, float] = field(default_factory=dict)
    info: dict[str, float] = field(default_factory=dict)
    error: str = ""

    @property
    def ok(self) -> bool:
        return not self.error

    def op(self, workload: str) -> OpFigures | None:
        return next((o for o in self.ops if o.workload == workload), None)

    def to_dict(self) -> dict:
        d: dict = {"kind": self.kind, "figures": dict(self.figures),
                   "ops": {o.workload: o.to_dict() for o in self.ops},
                   "wall": dict(self.wall), "info": dict(self.info)}
        if self.error:
            d["error"] = self.error
        return d

    @classmethod
    def from_dict(cls, case: str, d: dict) -> CaseResult:
        return cls(case, str(d["kind"]), {k: float(v) for k, v in d["figures"].items()},
                   tuple(OpFigures.from_dict(w, o) for w, o in d.get("ops", {}).items()),
                   {k: float(v) for k, v in d.get("wall", {}).items()},
                   dict(d.get("info", {})), str(d.get("error", "")))
