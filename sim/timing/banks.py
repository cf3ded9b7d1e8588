"""One channel's bank state machines: timers, row commands (Act, Pre) and refresh.

All times are integer DRAM cycles. A command issues at the earliest cycle >= the previous
issue + 1 that meets every constraint. Timers are plain lists so a loop can compare them
(``signature``) and move them (``shift``) when it extrapolates.
"""

from __future__ import annotations

import math
from itertools import chain

from ..errors import SimError
from ..hardware import DTYPE_BYTES, Hardware
from .stats import N_COUNTERS, Count

__all__ = ["NEG", "Banks", "cycles"]

NEG = -(1 << 40)  # "long ago": every constraint against it is met


def cycles(ns: float, tck: float) -> int:
    """Whole cycles covering ``ns`` (ceiling, tolerant of float noise)."""
    return max(0, math.ceil(ns / tck - 1e-9))


class Banks:
    """Bank, bank-group, unit and bus timers of one channel, with Act, Pre and refresh."""

    def __init__(self, hw: Hardware, name: str) -> None:
        o, t, p = hw.org, hw.timing, hw.pim
        self.name, self.tck = name, o.tck_ns
        self.trcd, self.trcd_wr, self.trcd_mac = t.trcd, t.trcd_wr, t.trcd_mac
        self.trp, self.tras, self.cl, self.cwl = t.trp, t.tras, t.cl, t.cwl
        self.tccd_s, self.tccd_l, self.trrd_s, self.trrd_l = t.tccd_s, t.tccd_l, t.trrd_s, t.trrd_l
        self.tfaw, self.trtp, self.trfc, self.trefi = t.tfaw, t.trtp, t.trfc, t.trefi
        self.burst = o.burst_length // 2
        self.wr_rec = t.cwl + self.burst + t.twr  # last write column to precharge
        self.pcol = max(1, cycles(hw.pim_column_ns, o.tck_ns))  # PIM unit column spacing
        f = hw.formats  # per integer format: column spacing, weights per column, pJ per weight
        self.fmt_col = {kind: (max(1, cycles(hw.format_column_ns(kind), o.tck_ns)),
                               p.lanes * hw.density(kind), f.mac_pj(kind) + f.dequant_pj)
                        for kind in f.weights}
        self.pipe = cycles(p.mac_latency_cycles * 1e3 / p.clock_mhz, o.tck_ns)
        self.maclat = self.burst + self.pipe  # column issue to result in the register
        self.gbps, self.lanes = hw.channel_bus_gbps, p.lanes
        self.col_bytes, self.bpg = o.column_bytes, hw.banks_per_group
        self.col_xfer = self.xfer(o.column_bytes)
        self.reg_bytes = p.register_lanes * DTYPE_BYTES[p.accum_dtype]
        self.lane_bytes = DTYPE_BYTES[p.accum_dtype]
        nb, ng, nu = o.banks_per_channel, o.bank_groups, hw.units_per_channel
        self.is_open, self.fresh = [False] * nb, [False] * nb
        self.act_t, self.pre_t, self.rd_t, self.wr_t = ([NEG] * nb for _ in range(4))
        self.g_act, self.g_col = [NEG] * ng, [NEG] * ng
        self.u_col, self.u_done = [NEG] * nu, [NEG] * nu
        self.faw = [NEG] * 4  # last four activation times, oldest first
        self.gb = [NEG] * max(1, hw.gb_elems // p.lanes)  # per global-buffer slot: data landed
        self.last, self.nb, self.any_act, self.any_col, self.bus, self.done = -1, 0, NEG, NEG, 0, 0
        self.due = t.trefi
        self.ctr = [0] * N_COUNTERS
        self.learnt: dict = {}  # loop extrapolation's memory, per compiled loop
        self.horizon = 1 + max(
            t.trcd, t.trcd_wr, t.trcd_mac, t.trp, t.tras, t.cl, t.cwl, t.tccd_l, t.trrd_l,
            t.tfaw, t.trtp, self.wr_rec, self.pcol, self.maclat,
            *(c[0] for c in self.fmt_col.values()),
        )

    # ---- stream interface (engine) -----------------------------------------------
    def now(self) -> int:
        """Issue cycle of the last command: iteration boundaries are measured here."""
        return self.last

    def signal_ns(self) -> float:
        """Completion of everything issued so far (transfers and MAC pipelines included)."""
        return max(self.done, self.last + 1, self.nb) * self.tck

    def wait_until(self, ns: float) -> None:
        self.nb = max(self.nb, cycles(ns, self.tck))

    def _timers(self) -> tuple[list[int], ...]:
        return (self.act_t, self.pre_t, self.rd_t, self.wr_t, self.g_act, self.g_col,
                self.u_col, self.u_done, self.faw, self.gb)

    def signature(self, gb_dep: bool) -> tuple | None:
        """State relative to now, timers older than every constraint clamped.

        None when the state cannot be compared: ``gb_dep`` (global-buffer addresses move
        with the loop) and a global-buffer slot still waits for its data.
        """
        now = self.last
        if gb_dep and max(self.gb) > now:
            return None
        lo = now - self.horizon
        scal = (self.nb, self.any_act, self.any_col, self.bus, self.done)
        rel = tuple((x if x > lo else lo) - now for x in chain(scal, *self._timers()))
        return (*self.is_open, *self.fresh, *rel)

    def shift(self, delta: int) -> None:
        """Move every timer ``delta`` cycles later (the refresh schedule stays put)."""
        for lst in self._timers():
            lst[:] = [x + delta for x in lst]
        self.last += delta
        self.nb += delta
        self.any_act += delta
        self.any_col += delta
        self.bus += delta
        self.done += delta

    def bound(self) -> int:
        """Skipped iterations must issue before this cycle (next refresh due)."""
        return self.due

    def skip_refreshes(self, n: int) -> None:
        """Move the refresh schedule ``n`` intervals on (their effect is accounted for
        by the caller)."""
        self.due += n * self.trefi

    # ---- helpers -------------------------------------------------------------------
    def xfer(self, nbytes: int) -> int:
        """Data bus cycles for ``nbytes``."""
        return cycles(nbytes / self.gbps, self.tck)

    def _fail(self, what: str, bank: int) -> None:
        raise SimError(f"stream {self.name!r}: {what} bank {bank}")

    # ---- row commands ------------------------------------------------------------
    def _act_time(self, banks: tuple[int, ...], groups: tuple[int, ...], k: int, t: int) -> int:
        t = max(t, self.any_act + self.trrd_s, self.faw[k - 1] + self.tfaw)
        pre_t, trp, g_act, trrd_l = self.pre_t, self.trp, self.g_act, self.trrd_l
        for b in banks:
            t = max(t, pre_t[b] + trp)
        for g in groups:
            t = max(t, g_act[g] + trrd_l)
        return t

    def _open(self, banks: tuple[int, ...], groups: tuple[int, ...], k: int, t: int) -> None:
        for b in banks:
            self.is_open[b], self.fresh[b], self.act_t[b] = True, True, t
        for g in groups:
            self.g_act[g] = t
        self.any_act, self.last = t, t
        self.faw = (self.faw + [t] * k)[-4:]
        self.ctr[Count.BANK_ACTS] += len(banks)
        self.ctr[Count.CMD_BUSY] += 1

    def act(self, env: dict, a: tuple) -> None:
        banks, groups, k = a
        for b in banks:
            if self.is_open[b]:
                self._fail("Act on an open bank (precharge it first):", b)
        while True:
            t = self._act_time(banks, groups, k, max(self.last + 1, self.nb))
            if t < self.due:
                break
            self.refresh()
        self._open(banks, groups, k, t)
        self.ctr[Count.ACT] += 1

    def _pre_time(self, banks: tuple[int, ...], t: int) -> int:
        tras, trtp, wr_rec = self.tras, self.trtp, self.wr_rec
        for b in banks:
            if self.is_open[b]:
                t = max(t, self.act_t[b] + tras, self.rd_t[b] + trtp, self.wr_t[b] + wr_rec)
        return t

    def pre(self, env: dict, a: tuple) -> None:
        banks = a[0]
        while True:
            t = self._pre_time(banks, max(self.last + 1, self.nb))
            if t < self.due:
                break
            self.refresh()
        self._close(banks, t)
        self.ctr[Count.PRE] += 1

    def _close(self, banks: tuple[int, ...], t: int) -> None:
        for b in banks:
            if self.is_open[b]:
                self.is_open[b], self.pre_t[b] = False, t
        self.last = t
        self.ctr[Count.CMD_BUSY] += 1

    def refresh(self) -> None:
        """All-bank refresh due now: precharge, tRFC, re-activate what was open."""
        opened = tuple(b for b, o in enumerate(self.is_open) if o)
        t = max(self.last + 1, self.due)
        if opened:
            t = self._pre_time(opened, t)
            self._close(opened, t)
            t += 1
        t = max([t] + [p + self.trp for p in self.pre_t])
        self.last = t + self.trfc - 1
        self.due += self.trefi
        self.ctr[Count.REFRESHES] += 1
        if opened:
            groups = tuple(sorted({b // self.bpg for b in opened}))
            k = 4 if len(opened) > 1 else 1
            self._open(opened, groups, k, self._act_time(opened, groups, k, self.last + 1))
