"""Placement of a step's operators: each one where tuning put it, or all on one side.

Engine choices are the spaces' ``placement`` (GEMV, point-wise), and ``scores`` and
``wsum`` (attention) parameters. :func:`side_schedule` moves a workload to one side:
the fastest measured schedule there, else the family default on that side. A step's
*plan* is ``auto`` (every operator's looked-up schedule: tuned per workload, so per batch
size and phase), ``pim`` (the GEMVs and attention in the banks, the rest as looked up)
or ``host`` (everything on the host); :func:`choose_plan` simulates all three and keeps
the fastest, so a compiled step is never slower than either side alone. ``host`` is the
plain-memory baseline: the device as ordinary DRAM, weights streamed to the host.
"""

from __future__ import annotations

from autosched.codegen.registry import build, lowering_for, space_of
from autosched.database import Database
from search_spaces import Schedule, Space, Workload
from search_spaces.gemv import gemv_default
from sim.errors import AutoschedError
from sim.hardware import Hardware
from sim.timing import simulate

__all__ = ["ENGINE_PARAMS", "PIM_FAMILIES", "PLANS", "faster_default", "on_side", "placement_key",
           "side_schedule"]

PLANS = ("auto", "pim", "host")
PIM_FAMILIES = ("gemv", "gemm", "attention")  # what a PIM-only step keeps in the banks
ENGINE_PARAMS = ("placement", "scores", "wsum")


def placement_key(model: str, phase: str, batch: int, context: int) -> str:
    """Where :func:`~autosched.compiler.choose_plan` records a step's placement plan."""
    return f"placement:{model}:{phase}:b{batch}:c{context}"


def on_side(point: dict, side: str) -> bool:
    """Whether every engine choice of ``point`` is ``side``."""
    return all(point[p] == side for p in ENGINE_PARAMS if p in point)


def _default_on(space: Space, w: Workload, hw: Hardware, side: str) -> dict | None:
    low = lowering_for(w)
    if w.op in ("gemv", "gemm"):
        try:
            return gemv_default(w, hw, placement=side)
        except AutoschedError:
            return None
    default = low.default(w, hw)
    if on_side(default, side):
        return default
    engines = [p for p in space.params if p.name in ENGINE_PARAMS]
    if not all(p.domain.contains(side) for p in engines):
        return None

    def choose(p):
        if p.name in ENGINE_PARAMS:
            return side
        return default[p.name] if p.name in default else p.domain.values()[0]

    point = space.fill(choose)
    if not space.validate(point):
        return point
    for point in space.enumerate(limit=4096):  # the first valid point on that side
        if on_side(point, side) and not space.validate(point):
            return point
    return None


def side_schedule(w: Workload, hw: Hardware, side: str,
                  db: Database | None = None) -> Schedule | None:
    """The schedule of ``w`` with every engine choice on ``side`` (``pim`` or ``host``):
    the fastest such measurement in ``db``, else the default moved there; None when the
    family cannot run there (the caller keeps its default)."""
    space = space_of(w, hw)
    if db is not None:
        ok = [m for m in db.records(workload=w, hw_fingerprint=hw.fingerprint,
                                    space=space.name, space_version=space.version)
              if m.ok and on_side(m.schedule.point, side)]
        if ok:
            return min(ok, key=lambda m: (m.latency_ns, m.created)).schedule
    point = _default_on(space, w, hw, side)
    return None if point is None else Schedule.of(space, point)


_FASTER: dict[tuple[str, str], Schedule] = {}


def faster_default(w: Workload, hw: Hardware) -> Schedule:
    """Of the family default and the defaults moved to each side, the one whose program
    simulates fastest on its own (remembered per workload and hardware). Prefill and
    decode at batch > 1 use it where nothing was tuned: an operator of several rows
    belongs where it runs faster (a GEMM reusing its weights on the host, attention in the
    banks, the two overlapped), which the batch-1 defaults do not know."""
    key = (w.key, hw.fingerprint)
    if key not in _FASTER:
        low = lowering_for(w)
        space = space_of(w, hw)
        cands = [Schedule.of(space, low.default(w, hw))]
        cands += [s for side in ("pim", "host")
                  if (s := side_schedule(w, hw, side)) is not None and s not in cands]
        timed = [(simulate(build(w, s, hw).program, hw).latency_ns, i, s)
                 for i, s in enumerate(cands)]
        _FASTER[key] = min(timed)[2]
    return _FASTER[key]
