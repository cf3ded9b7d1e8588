"""The attention layout's validity rules and derived geometry, stated once.

:func:`~search_spaces.attention.geometry.attention_layout_of` refuses a point with the reasons
of every rule it breaks, and the attention space wraps each rule as a constraint over its
parameters, so the space and the code generator accept the same points. Shape rules
(:func:`shape_reasons`) concern the workload itself: a shape that breaks one has no
space at all. Point rules read a few parameters (``reads``; ``v`` maps each to its value)
and return why they do not fit, or None; ``when`` is the placement they apply under.

Head dimensions: a position's ``d`` elements occupy ``dk = d`` rounded up to whole
columns (``L`` lanes each; the padding lanes hold zeros). Keys sit position-major, ``E //
dk`` positions per row. Values are split over ``uv`` units of each channel, ``cpp``
columns each, ``uv * cpp * L >= dk`` (padding again); ``uv`` is the schedule's
``v_units`` when the head dim needs padding or is not a power-of-two number of columns,
else ``min(units, columns)``; ``v_groups`` groups of ``uv`` units take alternate V
passes (``uv * v_groups`` must divide the channel's units). A staged softmax splits the cache slots
into stages of :func:`stage_width` slots, where every stream's K and V walks can stop. A
sliding window of ``W`` positions keeps the cache to
``span = min(capacity, W)`` slots for decoding (position ``p`` in slot ``p % span``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from sim.hardware import Hardware
from sim.kernels.base import ceil_div

__all__ = ["ATTN_RULES", "AttnRule", "AttnShape", "attention_reasons", "cache_rows",
           "channels_used", "k_fill", "k_parts", "k_set", "q_part", "shape_reasons",
           "stage_width", "unit_share"]

V = Mapping[str, Any]


@dataclass(frozen=True)
class AttnShape:
    """The workload's sizes (``cap`` KV positions reserved, sliding ``window`` or 0) on one
    hardware, with the derived per-row geometry every rule uses."""

    hw: Hardware
    b: int
    q: int
    h: int
    kvh: int
    d: int
    cap: int
    window: int = 0

    @property
    def lanes(self) -> int:
        """Elements of one column (one MAC lane each)."""
        return self.hw.column_elems

    @property
    def dk(self) -> int:
        """A position's elements padded to whole columns."""
        return ceil_div(self.d, self.lanes) * self.lanes

    @property
    def cols(self) -> int:
        """Columns of one position."""
        return self.dk // self.lanes

    @property
    def padded(self) -> bool:
        """Whether the schedule chooses ``v_units`` and states ``head_pad``."""
        return self.dk != self.d or self.cols & (self.cols - 1) != 0

    @property
    def span(self) -> int:
        """Cache slots: the capacity, or the window when decoding with a smaller one."""
        if self.window and self.q == 1:
            return min(self.cap, self.window)
        return self.cap

    @property
    def ppr(self) -> int:
        """Positions per row in position-major layouts."""
        return self.hw.row_elems // self.dk

    def v_options(self) -> tuple[int, ...]:
        """Possible ``v_units``: divisors of the channel's units (more than the columns
        pad a position with units of zeros, which cost no time and leave room for
        ``v_groups``)."""
        u = self.hw.units_per_channel
        return tuple(x for x in range(1, u + 1) if u % x == 0)

    def uv(self, v: V) -> int:
        """Units holding V."""
        if self.padded and "v_units" in v:
            return v["v_units"]
        return min(self.hw.units_per_channel, self.cols)

    def v_groups(self, v: V) -> int:
        """Unit groups the V passes alternate over (``v_groups``; 1 when absent)."""
        return v.get("v_groups", 1)

    def v_group_max(self) -> int:
        """The most V groups any point can have: the channel's units over the fewest that
        can hold V (1: the space has no ``v_groups``)."""
        least = min(self.v_options()) if self.padded else self.uv({})
        return self.hw.units_per_channel // least

    def cpp(self, v: V) -> int:
        """V columns per position per unit."""
        return ceil_div(self.cols, self.uv(v))

    def chunk_v(self, v: V) -> int:
        """Positions of one V pass per channel: a row of each V unit, or, when the cache
        is too short to give every stream of the sequence split a whole row, just enough
        that each stream gets a share (the rows used are the same: one pass per slot
        either way; a full row would leave the later streams without values)."""
        full = self.hw.columns_per_row // self.cpp(v)
        return min(full, ceil_div(self.span, v["seq_split"]))

    @property
    def plain(self) -> int:
        """Positions per pass in the host-read (plain) layout: the channel's banks' rows."""
        return self.hw.org.banks_per_channel * self.ppr


def shape_reasons(s: AttnShape, l: int | None = None) -> list[str]:  # noqa: E741
    """Why the workload cannot be laid out at all (empty: it can)."""
    hw, why = s.hw, []
    if hw.pim.lanes != s.lanes or hw.pim.register_lanes != s.lanes:
        why.append(f"{hw.name}: attention needs units of {s.lanes} lanes (a column)")
    if s.dk > hw.row_elems:
        why.append(f"head dim {s.d} exceeds the {hw.row_elems}-element row")
    if s.h % s.kvh:
        why.append(f"query heads {s.h} must be a multiple of kv heads {s.kvh}")
    if l is not None and not s.q <= l <= s.cap:
        why.append(f"need q={s.q} <= l={l} <= capacity={s.cap}")
    return why


def _kpim(s: AttnShape, v: V) -> tuple[int, int]:
    """(positions per channel pass, rows per pass) of K laid out for scores on PIM."""
    ppu = k_fill(s, v)
    return s.hw.units_per_channel * ppu, ceil_div(ppu, s.ppr)


def k_set(s: AttnShape, v: V) -> int:
    """Positions one register set of a unit scores: ``k_regs`` registers of ``lanes``
    positions each in ``dot`` mode, of one position each in ``lane`` mode."""
    return v["k_regs"] * (s.lanes if v["k_mode"] == "dot" else 1)


def unit_share(s: AttnShape, v: V) -> int:
    """Positions each unit must hold for every stream of the sequence split to get a
    share of the cache."""
    return ceil_div(s.span, s.hw.units_per_channel * v["seq_split"])


def k_fill(s: AttnShape, v: V) -> int:
    """Positions a unit holds per K pass: a whole row's (``ppr``, at least one register
    set), or, when the cache is too short to give every stream of the sequence split a
    pass of whole rows, just enough register sets that each stream gets a share (the
    rows used are the same: one pass per slot either way). When even one register set
    exceeds the unit's share (:func:`unit_share`), the set is filled only partly (whole
    registers, or the first lanes of one in ``dot`` mode, read out alone), so that every
    stream of the split still gets keys."""
    pps, share = k_set(s, v), unit_share(s, v)
    if share < pps:
        step = s.lanes if v["k_mode"] == "dot" else 1
        return share if share < step else ceil_div(share, step) * step
    return min(max(pps, s.ppr), ceil_div(share, pps) * pps)


def _k_granule(s: AttnShape, v: V) -> int:
    """Positions of a unit between the points a K pass can stop at and resume from: whole
    register sets that are whole rows (a row is activated once), or the whole pass."""
    ppu = k_fill(s, v)
    pps = min(k_set(s, v), ppu)
    g = math.lcm(pps, s.ppr)
    return g if ppu % g == 0 else ppu


def stage_width(s: AttnShape, v: V) -> int:
    """Cache slots of each stage of a staged softmax (``softmax_stages``): the span over
    the stages, rounded up to slots where every stream's K walk (whole rows of whole
    register sets, on every unit) and V walk (whole passes) can stop."""
    grain = math.lcm(s.hw.units_per_channel * _k_granule(s, v), s.chunk_v(v))
    return ceil_div(ceil_div(s.span, v["softmax_stages"]), grain) * grain


def _stages(s: AttnShape, v: V) -> str | None:
    n = v["softmax_stages"]
    if n == 1:
        return None
    got = ceil_div(s.span, stage_width(s, v))
    if got < n:
        return (f"softmax_stages={n}: the {s.span} cache slots split into only {got} "
                f"stages of {stage_width(s, v)} slots (where K and V passes can stop)")
    return None


def _stages_host(s: AttnShape, v: V) -> str | None:
    n = v["softmax_stages"]
    return None if n == 1 else f"softmax_stages={n} needs the scores on PIM"


def channels_used(v: V) -> int:
    """Channels a point occupies: ``kv_channels * seq_split * batch_split``."""
    return v["kv_channels"] * v["seq_split"] * v.get("batch_split", 1)


def cache_rows(s: AttnShape, v: V) -> int:
    """Rows per bank the KV cache needs: K's region, then V's, for every slot (a channel
    holds ``b / batch_split`` sequences' slots)."""
    ss = v["seq_split"]
    slots = s.b // v.get("batch_split", 1) * (s.kvh // v["kv_channels"])
    chunk_k, rpp_k = _kpim(s, v) if v["scores"] == "pim" else (s.plain, 1)
    chunk_v = s.chunk_v(v) if v["wsum"] == "pim" else s.plain
    groups = s.v_groups(v) if v["wsum"] == "pim" else 1
    k = slots * ceil_div(ceil_div(s.span, chunk_k), ss) * rpp_k
    return k + slots * ceil_div(ceil_div(ceil_div(s.span, chunk_v), ss), groups)


@dataclass(frozen=True)
class AttnRule:
    """One point rule: its name, the parameters it reads (``optional`` ones only where the
    space has them), the scores placement it needs (None: any), and the check."""

    name: str
    reads: tuple[str, ...]
    check: Callable[[AttnShape, V], str | None]
    scores: str | None = None
    optional: tuple[str, ...] = ()


def _limit(what: str, value: Callable[[AttnShape, V], int], cap: Callable[[AttnShape], int],
           unit: str) -> Callable[[AttnShape, V], str | None]:
    def check(s: AttnShape, v: V) -> str | None:
        n, top = value(s, v), cap(s)
        return None if n <= top else f"{what}={n} {unit} ({top})"
    return check


def _rows_one_group(s: AttnShape, v: V) -> str | None:
    """The cache's rows where V has no groups; a shape with ``v_groups`` under a PIM
    weighted sum is :func:`_rows_grouped`'s (a rule reads only active parameters)."""
    if v["wsum"] == "pim" and s.v_group_max() > 1:
        return None
    return _rows(s, v)


def _rows_grouped(s: AttnShape, v: V) -> str | None:
    return _rows(s, v) if "v_groups" in v else None


def _rows(s: AttnShape, v: V) -> str | None:
    rows, have = cache_rows(s, v), s.hw.org.rows_per_bank
    if rows > have:
        return (f"the KV cache needs {rows} rows per bank, the bank has {have}: spread kv "
                "heads or the sequence over more channels")
    return None


def q_part(s: AttnShape, qrows: int) -> int:
    """Elements of each query row one global-buffer load holds: the whole padded head
    when ``qrows`` rows fit, else the most whole columns that do (the K pass then loads
    the query in parts, row by row of the cache)."""
    gb = s.hw.gb_elems
    return s.dk if qrows * s.dk <= gb else gb // qrows // s.lanes * s.lanes


def k_parts(s: AttnShape, v: V) -> str | None:
    if q_part(s, v["k_qrows"]) >= s.dk:
        return None
    ppu = k_fill(s, v)
    pps = min(k_set(s, v), ppu)
    if pps >= ppu or pps % s.ppr == 0:
        return None
    return (f"a query loaded in parts needs register sets of whole rows: k_regs gives "
            f"{pps} positions per set, a row holds {s.ppr}")


def _groups(s: AttnShape, v: V) -> str | None:
    uv, g, u = s.uv(v), s.v_groups(v), s.hw.units_per_channel
    if u % (uv * g):
        return f"v_groups={g} groups of {uv} V units do not tile the channel's {u} units"
    return None


_REGS, _GB = (lambda s: s.hw.pim.registers), (lambda s: s.hw.gb_elems)
_CACHE = ("kv_channels", "seq_split", "scores", "wsum")
_VU, _BS, _VG = ("v_units",), ("batch_split",), ("v_groups",)
ATTN_RULES: tuple[AttnRule, ...] = (
    AttnRule("channels", ("kv_channels", "seq_split"),
             _limit("channels used", lambda s, v: channels_used(v),
                    lambda s: s.hw.org.channels, "the device has"), optional=_BS),
    AttnRule("k_registers", ("k_qrows", "k_regs"),
             _limit("k_qrows*k_regs", lambda s, v: v["k_qrows"] * v["k_regs"], _REGS,
                    "registers per unit, the unit has"), "pim"),
    AttnRule("k_buffer", ("k_qrows",),
             _limit("k_qrows*lanes", lambda s, v: v["k_qrows"] * s.lanes, _GB,
                    "query elements (a column each, at least) overflow the global buffer"),
             "pim"),
    AttnRule("k_parts", ("k_qrows", "k_mode", "k_regs", "seq_split"), k_parts, "pim"),
    AttnRule("v_registers", ("v_qrows",),
             _limit("v_qrows*cpp", lambda s, v: v["v_qrows"] * s.cpp(v), _REGS,
                    "registers per unit, the unit has"), optional=_VU),
    AttnRule("v_buffer", ("v_qrows", "seq_split"),
             _limit("v_groups*v_qrows*chunk_v",
                    lambda s, v: s.v_groups(v) * v["v_qrows"] * s.chunk_v(v), _GB,
                    "probabilities overflow the global buffer"), optional=_VU + _VG),
    AttnRule("v_groups", ("wsum",), _groups, optional=_VU + _VG),
    AttnRule("softmax_stages", ("softmax_stages", "seq_split", "k_mode", "k_regs"), _stages,
             "pim", optional=_VU),
    AttnRule("softmax_stages_host_scores", ("softmax_stages",), _stages_host, "host"),
    AttnRule("cache_rows", (*_CACHE, "k_mode", "k_regs"), _rows_one_group, "pim",
             optional=_VU + _BS),
    AttnRule("cache_rows_host_scores", _CACHE, _rows_one_group, "host", optional=_VU + _BS),
    AttnRule("cache_rows_v_groups", (*_CACHE, "k_mode", "k_regs"), _rows_grouped, "pim",
             optional=_VU + _BS + _VG),
    AttnRule("cache_rows_v_groups_host_scores", _CACHE, _rows_grouped, "host",
             optional=_VU + _BS + _VG),
)


def attention_reasons(s: AttnShape, point: V) -> list[str]:
    """Reasons of every rule ``point`` breaks (rules whose parameters it lacks skipped)."""
    why = []
    for r in ATTN_RULES:
        if (r.scores is None or point.get("scores") == r.scores) and all(
                x in point for x in r.reads):
            if (m := r.check(s, point)) is not None:
                why.append(f"{r.name}: {m}")
    return why
