"""The attention layout's validity rules, stated once.

:func:`~search_spaces.attention.geometry.plan_attention` refuses a point with the reasons
of every rule it breaks, and the attention space wraps each rule as a constraint over its
parameters, so the space and the code generator accept the same points. Shape rules
(:func:`shape_reasons`) concern the workload itself: a shape that breaks one has no
space at all. Point rules read a few parameters (``reads``; ``v`` maps each to its value)
and return why they do not fit, or None; ``when`` is the placement they apply under.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from sim.hardware import Hardware
from sim.kernels.base import ceil_div

__all__ = ["ATTN_RULES", "AttnRule", "AttnShape", "attention_reasons", "cache_rows",
           "shape_reasons"]

V = Mapping[str, Any]


@dataclass(frozen=True)
class AttnShape:
    """The workload's sizes (``cap`` KV positions reserved) on one hardware, with the
    derived per-row geometry every rule uses."""

    hw: Hardware
    b: int
    q: int
    h: int
    kvh: int
    d: int
    cap: int

    @property
    def ppr(self) -> int:
        """Positions per row in position-major layouts."""
        return self.hw.row_elems // self.d

    @property
    def uv(self) -> int:
        """Units holding V (one 16-output block each at least)."""
        return min(self.hw.units_per_channel, self.d // 16)

    @property
    def cpp(self) -> int:
        """V columns per position per unit."""
        return self.d // 16 // self.uv

    @property
    def chunk_v(self) -> int:
        """Positions of one V pass per channel (a row of each V unit)."""
        return self.hw.columns_per_row // self.cpp

    @property
    def plain(self) -> int:
        """Positions per pass in the host-read (plain) layout: the channel's banks' rows."""
        return self.hw.org.banks_per_channel * self.hw.row_elems // self.d


def shape_reasons(s: AttnShape, l: int | None = None) -> list[str]:  # noqa: E741
    """Why the workload cannot be laid out at all (empty: it can)."""
    e, u, d = s.hw.row_elems, s.hw.units_per_channel, s.d
    why = []
    if d % 16 or e % d or (d // 16) & (d // 16 - 1):
        why.append(f"head dim {d} must be 16 times a power of two dividing the {e}-element row")
    elif u % s.uv:
        why.append(f"head dim {d}: {d // 16} e-blocks do not tile {u} units")
    if s.h % s.kvh:
        why.append(f"query heads {s.h} must be a multiple of kv heads {s.kvh}")
    if l is not None and not s.q <= l <= s.cap:
        why.append(f"need q={s.q} <= l={l} <= capacity={s.cap}")
    return why


def _kpim(s: AttnShape, v: V) -> tuple[int, int]:
    """(positions per channel pass, rows per pass) of K laid out for scores on PIM."""
    pps = v["k_regs"] * (16 if v["k_mode"] == "dot" else 1)
    ppu = max(pps, s.ppr)
    return s.hw.units_per_channel * ppu, ppu // s.ppr


def cache_rows(s: AttnShape, v: V) -> int:
    """Rows per bank the KV cache needs: K's region, then V's, for every slot."""
    ss, slots = v["seq_split"], s.b * (s.kvh // v["kv_channels"])
    chunk_k, rpp_k = _kpim(s, v) if v["scores"] == "pim" else (s.plain, 1)
    chunk_v = s.chunk_v if v["wsum"] == "pim" else s.plain
    k = slots * ceil_div(ceil_div(s.cap, chunk_k), ss) * rpp_k
    return k + slots * ceil_div(ceil_div(s.cap, chunk_v), ss)


@dataclass(frozen=True)
class AttnRule:
    """One point rule: its name, the parameters it reads, the scores placement it needs
    (None: any), and the check."""

    name: str
    reads: tuple[str, ...]
    check: Callable[[AttnShape, V], str | None]
    scores: str | None = None


def _limit(what: str, value: Callable[[AttnShape, V], int], cap: Callable[[AttnShape], int],
           unit: str) -> Callable[[AttnShape, V], str | None]:
    def check(s: AttnShape, v: V) -> str | None:
        n, top = value(s, v), cap(s)
        return None if n <= top else f"{what}={n} {unit} ({top})"
    return check


def _rows(s: AttnShape, v: V) -> str | None:
    rows, have = cache_rows(s, v), s.hw.org.rows_per_bank
    if rows > have:
        return (f"the KV cache needs {rows} rows per bank, the bank has {have}: spread kv "
                "heads or the sequence over more channels")
    return None


_REGS, _GB = (lambda s: s.hw.pim.registers), (lambda s: s.hw.gb_elems)
_CACHE = ("kv_channels", "seq_split", "scores", "wsum")
ATTN_RULES: tuple[AttnRule, ...] = (
    AttnRule("channels", ("kv_channels", "seq_split"),
             _limit("kv_channels*seq_split", lambda s, v: v["kv_channels"] * v["seq_split"],
                    lambda s: s.hw.org.channels, "channels, the device has")),
    AttnRule("k_registers", ("k_qrows", "k_regs"),
             _limit("k_qrows*k_regs", lambda s, v: v["k_qrows"] * v["k_regs"], _REGS,
                    "registers per unit, the unit has"), "pim"),
    AttnRule("k_buffer", ("k_qrows",),
             _limit("k_qrows*d", lambda s, v: v["k_qrows"] * s.d, _GB,
                    "query elements overflow the global buffer"), "pim"),
    AttnRule("v_registers", ("v_qrows",),
             _limit("v_qrows*cpp", lambda s, v: v["v_qrows"] * s.cpp, _REGS,
                    "registers per unit, the unit has")),
    AttnRule("v_buffer", ("v_qrows",),
             _limit("v_qrows*chunk_v", lambda s, v: v["v_qrows"] * s.chunk_v, _GB,
                    "probabilities overflow the global buffer")),
    AttnRule("cache_rows", (*_CACHE, "k_mode", "k_regs"), _rows, "pim"),
    AttnRule("cache_rows_host_scores", _CACHE, _rows, "host"),
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
