"""Fitting the weights: when a step's memory plan overflows, denser GEMV layouts.

A GEMV layout pads its weights to whole passes of the units (outputs per pass,
reduction slices, input tiles); layouts of the same operator differ by up to a third in
the rows per bank they fill. When the budget does not fit after the KV cache was
compacted, :func:`dense_schedules` trades speed for rows: for each GEMV workload held in
the banks it simulates, alone, the points closest to the family default at each of the
densest row counts below the chosen one, keeps the options that are faster than every
denser one, then takes the option with the least added latency per row saved (times the
workload's count in the step) until the step fits, or takes the densest layouts when
none fits (the rows they free may let a denser cache fit). A step of several rows then
follows the layouts its batch-1 decode was fitted to (:func:`fitted_layouts`).
"""

from __future__ import annotations

from typing import Any

from search_spaces import Schedule, Workload
from search_spaces.gemv import point_opts
from sim.hardware import Hardware
from sim.kernels.gemv_layout import gemv_layout_of, layout_key
from sim.timing import simulate

__all__ = ["dense_schedules", "fitted_layouts", "layout_options"]

_ROW_COUNTS = 8  # densest row counts considered per workload
_TRIES = 2  # points simulated per row count

Option = tuple[int, float, Schedule]  # rows per bank, latency alone (ns), schedule


def _rows(w: Workload, point: dict, hw: Hardware) -> int:
    from .formats import format_device

    d = w.dims
    return gemv_layout_of(format_device(w, hw), d["n"], d["k"], d["m"],
                          point_opts(point)).rows_per_bank


def layout_options(w: Workload, hw: Hardware, current: Schedule) -> list[Option]:
    """The chosen schedule first, then denser layouts, each faster than every denser one
    (rows strictly decreasing, latency increasing)."""
    from ..registry import build, family_of, space_of

    space = space_of(w, hw)
    default = family_of(w).default(w, hw)
    r0 = _rows(w, current.point, hw)
    by_rows: dict[int, list[tuple[int, dict]]] = {}
    for p in space.enumerate():
        if p["placement"] != "pim" or (r := _rows(w, p, hw)) >= r0:
            continue
        by_rows.setdefault(r, []).append((sum(p.get(k) == v for k, v in default.items()), p))
    first = (r0, simulate(build(w, current, hw).program, hw).latency_ns, current)
    denser: list[Option] = []
    for r in sorted(by_rows)[:_ROW_COUNTS]:  # the densest row counts
        near = sorted(by_rows[r], key=lambda sp: -sp[0])[:_TRIES]
        timed = [(simulate(build(w, s, hw).program, hw).latency_ns, s)
                 for s in (Schedule.of(space, p) for _, p in near)]
        ns, s = min(timed, key=lambda t: t[0])
        denser.append((r, ns, s))
    kept, fastest = [], float("inf")
    for o in denser:  # densest first: keep what beats every denser option
        if o[1] < fastest:
            kept.append(o)
            fastest = o[1]
    return [first, *kept[::-1]]


def dense_schedules(cm: Any, ops: tuple[str, ...]) -> dict[str, Schedule]:
    """Node name -> denser GEMV schedule so that ``cm``'s step fits its device, choosing
    the least added latency per row saved (the densest layouts when even they do not
    fit); empty when the step fits. Only GEMVs (workload ``ops``) whose schedule was
    looked up, placed in the banks, with no fixed layout, move."""
    bd, hw = cm.budget, cm.hw
    if bd.fits:
        return {}
    need = -(-(bd.used - bd.capacity) // bd.row_index)
    groups: dict[str, list[str]] = {}
    for n in cm.graph:
        if n.name not in cm.choices:  # a node of another pipeline stage
            continue
        c = cm.choices[n.name]
        w = c.workload
        if (w.op in ops and c.kind.looked_up
                and c.schedule.point.get("placement") == "pim" and w.attr("layout") is None):
            groups.setdefault(w.key, []).append(n.name)
    options = {key: layout_options(cm.choices[names[0]].workload, hw,
                                   cm.choices[names[0]].schedule)
               for key, names in groups.items()}
    at = {key: 0 for key in options}
    while need > 0:
        moves = []
        for key, opts in options.items():
            i = at[key]
            if i + 1 < len(opts):
                saved = (opts[i][0] - opts[i + 1][0]) * len(groups[key])
                cost = (opts[i + 1][1] - opts[i][1]) * len(groups[key])
                moves.append((cost / saved, key, saved))
        if not moves:
            break  # the densest layouts: the rows they free may still let the cache fit
        _, key, saved = min(moves)
        at[key] += 1
        need -= saved
    return {name: options[key][at[key]][2] for key, names in groups.items() if at[key]
            for name in names}


def _weight(w: Workload) -> tuple:
    """What identifies a GEMV's weights across steps: its n, k and attributes but layout."""
    return (w.dims["n"], w.dims["k"], tuple((k, v) for k, v in w.attrs if k != "layout"))


def fitted_layouts(one: Any, ops: tuple[str, ...]) -> dict[tuple, str]:
    """The weights of ``one`` (the compiled batch-1 decode step) that its GEMVs (workload
    ``ops``) fitted to denser layouts: their identity -> the layout's key."""
    layouts = {}
    for n in one.graph:
        if n.name not in one.choices:  # a node of another pipeline stage
            continue
        c = one.choices[n.name]
        if c.kind == "fitted" and c.workload.op in ops and c.workload.dims["m"] == 1:
            d = c.workload.dims
            from .formats import format_device

            dev = format_device(c.workload, one.hw)
            opts = point_opts(c.schedule.point).resolve(dev, d["n"], d["k"], 1)
            layouts[_weight(c.workload)] = layout_key(opts)
    return layouts


def follow(w: Workload, layouts: dict[tuple, str]) -> Workload | None:
    """``w`` (a pinned GEMV of several rows) moved to the layout its weights were fitted to,
    or None when they were not, or it reads them there already."""
    key = layouts.get(_weight(w))
    if key is None or w.attr("layout") in (None, key):
        return None
    return Workload(w.op, w.shape, w.dtype, tuple(sorted({**dict(w.attrs), "layout": key}.items())))
