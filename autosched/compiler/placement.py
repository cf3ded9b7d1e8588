"""Placement of a step's operators: each one where tuning put it, or all on one side.

Engine choices are the parameters each family names (``Family.engine_params``).
:func:`side_schedule` moves a workload to one side: the fastest measured schedule there,
else the family's point on that side (``Family.side_point``). A step's *plan* is
``auto`` (every operator's looked-up schedule: tuned per workload, so per batch size and
phase), ``pim`` (every family that keeps its work ``in_banks`` there, the rest as looked
up) or ``host`` (everything on the host); ``choose_placement`` simulates all three and keeps
the fastest, so a compiled step is never slower than either side alone. ``host`` is the
plain-memory baseline: the device as ordinary DRAM, weights streamed to the host.
"""

from __future__ import annotations

import enum

from autosched.database import Database
from autosched.families import build, family_of, space_of
from search_spaces import Schedule, Workload
from sim.hardware import Hardware
from sim.timing import simulate

__all__ = ["PLACEMENTS", "Placement", "faster_default", "side_schedule"]


class Placement(enum.StrEnum):
    """Where a step's operators run: each where its schedule puts it (``auto``), or every
    engine choice on one side."""

    AUTO = "auto"
    PIM = "pim"
    HOST = "host"


PLACEMENTS: tuple[str, ...] = tuple(Placement)


def side_schedule(w: Workload, hw: Hardware, side: str,
                  db: Database | None = None) -> Schedule | None:
    """The schedule of ``w`` with every engine choice on ``side`` (``pim`` or ``host``):
    the fastest such measurement in ``db``, else the default moved there; None when the
    family cannot run there (the caller keeps its default)."""
    fam, space = family_of(w), space_of(w, hw)
    if db is not None:
        ok = [m for m in db.records(workload=w, hw_fingerprint=hw.fingerprint,
                                    space=space.name, space_version=space.version)
              if m.ok and fam.on_side(m.schedule.point, side)]
        if ok:
            return min(ok, key=lambda m: (m.latency_ns, m.created)).schedule
    point = fam.side_point(w, hw, side)
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
        low = family_of(w)
        space = space_of(w, hw)
        cands = [Schedule.of(space, low.default(w, hw))]
        cands += [s for side in ("pim", "host")
                  if (s := side_schedule(w, hw, side)) is not None and s not in cands]
        timed = [(simulate(build(w, s, hw).program, hw).latency_ns, i, s)
                 for i, s in enumerate(cands)]
        _FASTER[key] = min(timed)[2]
    return _FASTER[key]
