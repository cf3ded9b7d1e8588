"""The GEMV/GEMM schedule space: ``y[m, n] = x[m, k] @ W[n, k]^T`` on a PIM device.

``placement`` picks the engine. The weights are stored once, in their *resident layout*:
the PIM layout (``sim.kernels.LAYOUT_FIELDS``) given by the workload's ``layout`` attribute
(``sim.kernels.layout_key``), or else the default layout of the same weights at one
activation row (:func:`default_layout`: the layout batch-1 decode uses). ``host``: the
host reads the resident rows and multiplies (``sim.kernels.gemv_host``); without a PIM
layout (nothing fits on PIM) the weights sit in plain-memory layout
(``sim.kernels.gemv_baseline``). ``pim``: every ``sim.kernels.GemvOpts`` decision is a
parameter (``tile_outer`` is the loop order ``tile_outer`` when true, ``row_outer`` when
false; ``interleave`` exists only on devices with bank-pair units); with a ``layout``
attribute the layout parameters have that one value. The constraints are the kernel's own
rules (``sim.kernels.GEMV_RULES`` for PIM, ``baseline_reason`` for a plain layout)
wrapped as :class:`~search_spaces.Rule` s, so a point is valid exactly when the kernel
accepts it. ``gb_tile`` ranges over powers of two, plus the library kernel's own tile
where that is not one (so the shipped kernel, :func:`gemv_library`, is a point of the
space unless a pinned layout excludes it); on a device whose row geometry is not a power
of two some modes then have no valid tile, and validation says so.
"""

from __future__ import annotations

import itertools
from dataclasses import replace
from functools import lru_cache
from typing import Any

from search_spaces.constraints import Rule
from search_spaces.domains import Categorical, Divisors, IntRange, PowersOfTwo, PowersOfTwoAnd
from search_spaces.params import Cond, Param
from search_spaces.space import Space
from search_spaces.workload import Workload
from sim.errors import AutoschedError, check
from sim.hardware import Hardware
from sim.kernels import GEMV_RULES, GemvOpts, GemvShape, baseline_reason, gemv_layout_of
from sim.kernels.base import ceil_div, round_up
from sim.kernels.gemv_bound import gemv_terms, layout_estimate_ns
from sim.kernels.gemv_layout import LAYOUT_FIELDS, parse_layout

from .shortlist import timed_order

__all__ = ["GEMV_VERSION", "default_layout", "gemv_default", "gemv_library", "gemv_modes",
           "gemv_space", "point_opts", "resident_layout"]

# 2: host placement reads the resident PIM layout; the ``layout`` attribute pins it;
#    gb_tile also holds the library kernel's tile
# 3: row_prefetch (the pipelined row walk) on bank-pair devices
GEMV_VERSION = 3
_PIM = Cond("placement", "pim")
_BOOL = Categorical((False, True))


def gemv_modes(hw: Hardware) -> tuple[str, ...]:
    """The MAC modes ``hw`` offers for a GEMV (dot needs an adder tree; bcast and lane
    need one register lane per SIMD lane)."""
    modes = ("dot",) if hw.pim.adder_tree else ()
    if hw.pim.register_lanes == hw.pim.lanes:
        modes += ("bcast", "lane")
    return modes


def _dims(w: Workload) -> tuple[int, int, int]:
    check(w.op in ("gemv", "gemm"), f"the gemv space takes gemv or gemm workloads, not {w.op}")
    d = w.dims
    return d["m"], d["n"], d["k"]


# GemvOpts field -> space parameter; fields without a parameter take their default
_PARAM = {"loop_order": "tile_outer"}
_DEFAULTS = GemvOpts().to_dict()


def _opts_view(values: dict[str, Any]) -> dict[str, Any]:
    """The GemvOpts fields of (some of) a point's values, named as the rules read them."""
    v = dict(values)
    if "tile_outer" in v:
        v["loop_order"] = "tile_outer" if v.pop("tile_outer") else "row_outer"
    v.setdefault("interleave", False)
    v.setdefault("row_prefetch", False)
    return v


@lru_cache(maxsize=1024)
def default_layout(hw: Hardware, n: int, k: int) -> GemvOpts | None:
    """The layout batch-1 decode uses by default for ``W[n, k]`` (the first of the
    competent options, see :func:`gemv_default`), resolved; None when no layout fits."""
    for o in (*_competent(hw, n, k, 1, 1), GemvOpts()):
        if not o.validate(hw, n, k, 1):
            return o.resolve(hw, n, k, 1)
    return None


def resident_layout(workload: Workload, hw: Hardware) -> GemvOpts | None:
    """Where the weights of ``workload`` live: its ``layout`` attribute, else the default
    layout at one row (None: plain memory)."""
    _, n, k = _dims(workload)
    key = workload.attr("layout")
    if key is None:
        return default_layout(hw, n, k)
    fixed = parse_layout(str(key))
    o = GemvOpts(**fixed)
    why = o.validate(hw, n, k, 1)
    check(not why, f"{workload.key}: layout {key} does not fit: {'; '.join(why)}")
    return o.resolve(hw, n, k, 1)


def _rules(hw: Hardware, m: int, n: int, k: int, names: set[str],
           resident: GemvOpts | None) -> list[Rule]:
    """The kernel's rules over the space's parameters ``names``."""
    shape, out = GemvShape(hw, n, k, m), []
    for r in GEMV_RULES:
        reads = tuple(_PARAM.get(f, f) for f in r.reads if _PARAM.get(f, f) in names)
        fixed = {f: _DEFAULTS[f] for f in r.reads if _PARAM.get(f, f) not in names}

        def check(values: dict, _r=r, _fixed=fixed) -> str | None:
            return _r.check(shape, {**_fixed, **_opts_view(values)})

        out.append(Rule(r.name, reads, check, ("gemv", hw.fingerprint, m, n, k, r.name), _PIM))
    if resident is None:
        out.append(Rule("host_rows", (), lambda _v: baseline_reason(hw, n, k),
                        ("gemv_baseline", hw.fingerprint, n, k), Cond("placement", "host")))
    return out


def gemv_space(workload: Workload, hw: Hardware) -> Space:
    """The space of ``workload`` (family gemv or gemm) on ``hw``."""
    m, n, k = _dims(workload)
    p, c = hw.pim, hw.org.channels
    modes = gemv_modes(hw)
    check(bool(modes), f"{hw.name} offers no GEMV MAC mode (needs an adder tree or "
                       "register_lanes == lanes)")
    lo = 1 if "bcast" in modes else p.lanes
    tiles = PowersOfTwo(lo, max(lo, hw.gb_elems))
    shipped = _shipped(hw, m, n, k)
    if shipped is not None and not tiles.contains(shipped.gb_tile):
        tiles = PowersOfTwoAnd(lo, max(lo, hw.gb_elems), (shipped.gb_tile,))
    domains = {
        "mode": Categorical(modes),
        "channels": Divisors(c),
        "k_split": Divisors(c),
        "gb_tile": tiles,
        "registers": IntRange(1, p.registers),
        "double_buffer": _BOOL,
        "interleave": _BOOL,
    }
    if workload.attr("layout") is not None:
        resident = resident_layout(workload, hw)
        domains.update({f: Categorical((getattr(resident, f),)) for f in LAYOUT_FIELDS})
    params = [Param("placement", Categorical(("pim", "host")))]
    params += [Param(f, domains[f], _PIM) for f in ("mode", "channels", "k_split", "gb_tile",
                                                    "registers")]
    params += [Param("batch_rows", IntRange(1, min(m, p.registers)), _PIM),
               Param("tile_outer", _BOOL, _PIM), Param("double_buffer",
                                                       domains["double_buffer"], _PIM)]
    if p.banks_per_unit == 2:
        params.append(Param("interleave", domains["interleave"], _PIM))
        params.append(Param("row_prefetch", _BOOL, _PIM))
    cons = _rules(hw, m, n, k, {p.name for p in params}, resident_layout(workload, hw))
    return Space(workload.op, GEMV_VERSION, tuple(params), tuple(cons),
                 macs=float(m * n * k))


def point_opts(point: dict) -> GemvOpts:
    """The library options of a pim point."""
    return GemvOpts(mode=point["mode"], channels=point["channels"], k_split=point["k_split"],
                    gb_tile=point["gb_tile"], registers=point["registers"],
                    batch_rows=point["batch_rows"],
                    loop_order="tile_outer" if point["tile_outer"] else "row_outer",
                    interleave=point.get("interleave", False),
                    double_buffer=point["double_buffer"],
                    row_prefetch=point.get("row_prefetch", False))


def _opts_point(o: GemvOpts, hw: Hardware) -> dict:
    pt = {"placement": "pim", "mode": o.mode, "channels": o.channels, "k_split": o.k_split,
          "gb_tile": o.gb_tile, "registers": o.registers, "batch_rows": o.batch_rows,
          "tile_outer": o.loop_order == "tile_outer", "double_buffer": o.double_buffer}
    if hw.pim.banks_per_unit == 2:
        pt["interleave"] = o.interleave
        pt["row_prefetch"] = o.row_prefetch
    return pt


def _shipped(hw: Hardware, m: int, n: int, k: int) -> GemvOpts | None:
    """The library kernel's options for this shape, resolved; None when it cannot run it."""
    return None if GemvOpts().validate(hw, n, k, m) else GemvOpts().resolve(hw, n, k, m)


def gemv_library(workload: Workload, hw: Hardware) -> dict | None:
    """The library GEMV as shipped (``sim.kernels.gemv`` with default ``GemvOpts``: outputs
    split over every channel, whole-buffer input tiles, no interleaving, one batch row per
    opened row) as a point of the space; None when that kernel cannot lay out the shape."""
    m, n, k = _dims(workload)
    shipped = _shipped(hw, m, n, k)
    if shipped is None:
        return None
    pt = _opts_point(shipped, hw)
    return None if gemv_space(workload, hw).validate(pt) else pt


def _register_choices(hw: Hardware) -> tuple[int | None, ...]:
    """Stripes per unit a default tries: enough for one pass (None), and every power of
    two below the register file (fewer stripes pad fewer outputs when passes are many)."""
    return (None, *(1 << i for i in range(hw.pim.registers.bit_length())
                     if 1 << i < hw.pim.registers))


@lru_cache(maxsize=1024)
def _competent(hw: Hardware, n: int, k: int, m: int, br: int) -> tuple[GemvOpts, ...]:
    """Library options a careful engineer would pick, best first: split the reduction over
    channels until the outputs fill every unit's lanes (the layout wastes no bank rows on
    padding) but no deeper than the read-out of one partial per output and slice repays,
    and alternate the two banks of a pair so one activates while the other MACs (in
    broadcast columns, also weighed where the unit has an adder tree), where a
    bank has more than one row to activate (with one row there is nothing to hide, and
    the pair's second bank only halves the tile, leaving the weights of a small matrix in
    half the channels), with the pipelined row walk hiding each activation in the partner
    bank's MACs; double-buffered broadcasts where the estimate says they repay the
    halved tile, the stripes per unit that pad the outputs least, and the tile that pads
    each reduction slice least. Ordered by the layout estimate
    (:func:`~sim.kernels.gemv_bound.layout_estimate_ns`: rows walked, activations not
    hidden, read-out), then the smaller split; the estimate's shortlist goes first in
    order of simulated time (:func:`.shortlist.timed_order`)."""
    splits = [d for d in range(1, hw.org.channels + 1)
              if hw.org.channels % d == 0 and d & (d - 1) == 0]
    pairs = (True, False) if hw.pim.banks_per_unit == 2 else (False,)
    # an adder tree's dot columns are the unit's own default, but the interleaved walk of
    # a bank pair needs broadcast columns: where both exist, both are weighed
    modes = (None, "bcast") if hw.pim.adder_tree and hw.pim.banks_per_unit == 2 else (None,)
    ranked = []
    for ks in splits:
        for il, mode in itertools.product(pairs, modes):
            for db, regs in itertools.product((False, True), _register_choices(hw)):
                o = GemvOpts(batch_rows=br, k_split=ks, interleave=il, row_prefetch=il,
                             double_buffer=db, registers=regs, mode=mode)
                if o.validate(hw, n, k, m):
                    continue
                pl = gemv_layout_of(hw, n, k, m, o)
                for tile in _packing_tiles(pl, ceil_div(k, ks)):
                    t = replace(o, gb_tile=tile)
                    if tile == pl.T or not t.validate(hw, n, k, m):
                        est = layout_estimate_ns(hw, gemv_layout_of(hw, n, k, m, t))
                        ranked.append(((est, ks, db, regs or 0, -tile), t))
    ranked.sort(key=lambda r: r[0])
    return tuple(timed_order(hw, n, k, m, [(key[0], o) for key, o in ranked]))


def _packing_tiles(pl: Any, kslice: int) -> list[int]:
    """``pl``'s tile and every smaller one that pads a ``kslice``-element reduction slice
    no more than all larger ones (equal padding stays a candidate: the timed order weighs
    a large tile's fewer broadcasts against a small one's packing): a slice a whole tile
    overshoots (Gemma's 2,304 over four slices is 576 elements in 1,024-element tiles)
    wastes that much of every stripe's rows, while tiles that divide a row pack several
    slice segments into one row, at the price of more broadcasts."""
    step = 2 if pl.opts.double_buffer else 1
    out, least = [], None
    for t in (pl.T >> i for i in range(pl.T.bit_length())):
        if t < pl.g or pl.T % t:  # halvings of the tile, down to the unit's group
            break
        pad = round_up(kslice, t * step)
        if least is None or pad <= least:
            out.append(t)
            least = pad
    return out


def gemv_default(workload: Workload, hw: Hardware, placement: str | None = None) -> dict:
    """What a competent engineer writes by hand; host when nothing fits on PIM.

    gemv: the library kernel with the reduction split over channels just enough to fill
    every unit's lanes and, on bank-pair devices, bank interleaving (see ``_competent``);
    the plain library options when no such choice is valid. gemm: the same with
    ``batch_rows`` as large as valid (weight reuse across the batch), on the faster side:
    the host when its best case (``sim.kernels.gemv_bound.gemv_terms``) beats PIM's. With a
    ``layout`` attribute the PIM options keep that layout. ``placement`` forces a side.
    Raises AutoschedError when neither placement (or the forced one) fits the device.
    """
    m, n, k = _dims(workload)
    space = gemv_space(workload, hw)
    host_ok = not space.validate({"placement": "host"})
    if host_ok and (placement == "host" or (placement is None and workload.op == "gemm" and (
            (t := gemv_terms(hw, m, n, k))["host"] < t["pim"]))):
        return {"placement": "host"}
    pinned = workload.attr("layout") is not None
    tries = [1] if workload.op == "gemv" else range(min(m, hw.pim.registers), 0, -1)
    for br in tries if placement != "host" else ():
        res = resident_layout(workload, hw) if pinned else None
        cands = ((replace(res, batch_rows=br, row_prefetch=res.interleave),) if pinned
                 else (*_competent(hw, n, k, m, br), GemvOpts(batch_rows=br)))
        for o in cands:
            if o.validate(hw, n, k, m):
                continue
            pt = _opts_point(o.resolve(hw, n, k, m), hw)
            if not space.validate(pt):
                return pt
    if host_ok and placement is None:
        return {"placement": "host"}
    if placement is not None:
        raise AutoschedError(f"{workload.key} does not fit {hw.name} with placement "
                             f"{placement}")
    raise AutoschedError(f"{workload.key} fits {hw.name} neither on PIM nor in plain memory: "
                         f"{'; '.join(space.validate({'placement': 'host'}))}")
