"""The GEMV layout's validity rules, stated once.

:func:`~sim.kernels.gemv_layout.gemv_layout_of` evaluates every rule on resolved options and
refuses a layout with the reasons of those that fail; the GEMV schedule space
(``search_spaces.gemv``) wraps each rule as a constraint over its own parameters. A point
is therefore valid for the space exactly when the kernel can lay it out.

A rule reads a few :class:`~sim.kernels.GemvOpts` fields (``reads``; ``v`` maps each to
its value) for ``y[batch, n] = x @ W[n, k]^T`` on one hardware (:class:`GemvShape`) and
returns why they do not fit, or None. Symbols follow ``gemv_layout``'s docstring.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..hardware import Hardware
from .base import ceil_div, round_up

__all__ = ["GEMV_RULES", "LOOP_ORDERS", "MODES", "GemvRule", "GemvShape", "gemv_reasons",
           "k_per_row", "rows_per_bank"]

MODES = ("dot", "bcast", "lane")
LOOP_ORDERS = ("row_outer", "tile_outer")
V = Mapping[str, Any]


@dataclass(frozen=True)
class GemvShape:
    """What a rule checks options against: the hardware and the GEMV's sizes."""

    hw: Hardware
    n: int
    k: int
    batch: int


@dataclass(frozen=True)
class GemvRule:
    """One rule: its name, the option fields it reads, and the check."""

    name: str
    reads: tuple[str, ...]
    check: Callable[[GemvShape, V], str | None]
    tier: int = 1


def k_per_row(mode: str, hw: Hardware) -> int:
    """``Kr``: k-elements of one stripe in a row (one per column in ``bcast``)."""
    return hw.columns_per_row if mode == "bcast" else hw.row_elems


def _passes(s: GemvShape, v: V) -> int:
    """Output passes: ``n`` over the outputs of one pass, ``channels / k_split`` channels."""
    opr = 1 if v["mode"] == "lane" else s.hw.pim.register_lanes
    per = max(v["channels"] * s.hw.units_per_channel * v["registers"] * opr, 1)
    return ceil_div(s.n * max(v["k_split"], 1), per)


def rows_per_bank(s: GemvShape, v: V) -> int:
    """Rows one bank holds for the layout of ``v`` (meaningful when the tile fits)."""
    hw, t, db = s.hw, v["gb_tile"], 1 + bool(v["double_buffer"])
    kr = k_per_row(v["mode"], hw)
    rps, spr = max(t // kr, 1), max(kr // t, 1)
    ntiles = round_up(ceil_div(s.k, v["k_split"]), t * db) // t
    stripes = (v["registers"] * (hw.pim.register_lanes // spr) if v["mode"] == "dot"
               else v["registers"] // spr)
    rpsb = rps // 2 if v.get("interleave") else rps
    return _passes(s, v) * ntiles * stripes * rpsb


def _mode(s: GemvShape, v: V) -> str | None:
    p, m = s.hw.pim, v["mode"]
    if m not in MODES:
        return f"mode {m!r} unknown: use dot, bcast or lane"
    if m == "dot" and not p.adder_tree:
        return f"mode dot needs an adder tree, which {s.hw.name} lacks: use bcast or lane"
    if m != "dot" and p.register_lanes != p.lanes:
        return f"mode {m} needs register_lanes == lanes: use dot"
    return None


def _tile(s: GemvShape, v: V) -> str | None:
    t, kr, lanes = v["gb_tile"], k_per_row(v["mode"], s.hw), s.hw.pim.lanes
    if t <= 0:
        return f"gb_tile {t} must be positive"
    if v["mode"] != "bcast" and t % lanes:
        return f"gb_tile {t} must be a multiple of the {lanes} lanes in {v['mode']} mode"
    if (t % kr if t >= kr else kr % t):
        return f"gb_tile {t} must be a multiple or divisor of {kr} (k per row)"
    return None


def _segments(s: GemvShape, v: V) -> str | None:
    t, kr = v["gb_tile"], k_per_row(v["mode"], s.hw)
    if t <= 0 or t >= kr or kr % t or (v["mode"] != "bcast" and t % s.hw.pim.lanes):
        return None  # a tile of at least a row, or one the tile rule refuses
    spr = kr // t
    share = s.hw.pim.register_lanes if v["mode"] == "dot" else v["registers"]
    if share % spr:
        what = "register lanes" if v["mode"] == "dot" else "registers"
        return (f"gb_tile {t} packs {spr} segments per row; {spr} must divide the {share} "
                f"{what}: use a larger tile or more registers")
    return None


def _live(s: GemvShape, v: V) -> str | None:
    outer = v["loop_order"] == "tile_outer"
    live = v["batch_rows"] * v["registers"] * (_passes(s, v) if outer else 1)
    if live > s.hw.pim.registers:
        return (f"{live} registers live per unit (batch_rows x registers"
                f"{' x passes' if outer else ''}) exceed the {s.hw.pim.registers} available")
    return None


def _gb(s: GemvShape, v: V) -> str | None:
    db = bool(v["double_buffer"])
    need = v["batch_rows"] * v["gb_tile"] * (2 if db else 1)
    if need > s.hw.gb_elems:
        return (f"batch_rows x gb_tile{' x 2 (double buffer)' if db else ''} = {need} "
                f"exceeds the global buffer of {s.hw.gb_elems} elements")
    return None


def _interleave(s: GemvShape, v: V) -> str | None:
    kr = k_per_row(v["mode"], s.hw)
    if v["interleave"] and (s.hw.pim.banks_per_unit != 2 or max(v["gb_tile"] // kr, 1) % 2):
        return f"interleave needs bank-pair units and gb_tile a multiple of {2 * kr}"
    return None


def _prefetch(s: GemvShape, v: V) -> str | None:
    if v.get("row_prefetch") and not (v.get("interleave") and v["loop_order"] == "row_outer"):
        return "row_prefetch needs interleave and loop_order row_outer"
    return None


def _rows(s: GemvShape, v: V) -> str | None:
    rows = rows_per_bank(s, v)
    if rows > s.hw.org.rows_per_bank:
        return (f"the layout needs {rows} rows per bank, the bank has "
                f"{s.hw.org.rows_per_bank}: use more channels or fewer passes")
    return None


def _channels(s: GemvShape, v: V) -> str | None:
    c = s.hw.org.channels
    return None if 1 <= v["channels"] <= c else f"channels {v['channels']} outside [1, {c}]"


def _split(s: GemvShape, v: V) -> str | None:
    if v["k_split"] >= 1 and v["channels"] % v["k_split"] == 0:
        return None
    return f"k_split {v['k_split']} must be >= 1 and divide channels ({v['channels']})"


def _batch_rows(s: GemvShape, v: V) -> str | None:
    if 1 <= v["batch_rows"] <= s.batch:
        return None
    return f"batch_rows {v['batch_rows']} must be in [1, batch={s.batch}]"


def _order(s: GemvShape, v: V) -> str | None:
    if v["loop_order"] in LOOP_ORDERS:
        return None
    return f"loop_order {v['loop_order']!r} unknown (known: {', '.join(LOOP_ORDERS)})"


# Tier 1 makes the options meaningful, tier 2 checks resources, tier 3 the bank capacity;
# gemv_layout_of reports the first tier that fails (later ones assume the earlier hold).
GEMV_RULES: tuple[GemvRule, ...] = (
    GemvRule("mode", ("mode",), _mode),
    GemvRule("loop_order", ("loop_order",), _order),
    GemvRule("channels", ("channels",), _channels),
    GemvRule("k_split_divides", ("channels", "k_split"), _split),
    GemvRule("batch_rows", ("batch_rows",), _batch_rows),
    GemvRule("registers", ("registers",),
             lambda s, v: None if v["registers"] >= 1 else
             f"registers {v['registers']} must be >= 1"),
    GemvRule("tile", ("mode", "gb_tile"), _tile),
    GemvRule("segments", ("mode", "gb_tile", "registers"), _segments),
    GemvRule("gb_fits", ("batch_rows", "gb_tile", "double_buffer"), _gb, tier=2),
    GemvRule("live_registers", ("mode", "channels", "k_split", "registers", "batch_rows",
                                "loop_order"), _live, tier=2),
    GemvRule("interleave", ("mode", "gb_tile", "interleave"), _interleave, tier=2),
    GemvRule("row_prefetch", ("interleave", "loop_order", "row_prefetch"), _prefetch),
    GemvRule("bank_rows", ("mode", "channels", "k_split", "gb_tile", "registers",
                           "double_buffer", "interleave"), _rows, tier=3),
)


def gemv_reasons(s: GemvShape, v: V) -> list[str]:
    """Reasons of the first tier of rules that ``v`` (every GemvOpts field) breaks."""
    for tier in (1, 2, 3):
        why = [m for r in GEMV_RULES if r.tier == tier and (m := r.check(s, v)) is not None]
        if why:
            return why
    return []
