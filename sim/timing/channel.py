"""Column, register and global-buffer commands of one PIM channel, and its data bus.

A multi-column command is a regular burst whose columns are spaced by a fixed interval,
computed in closed form and split only where a refresh falls inside it. Transfers on the
data bus serialise; the global buffer tracks when each slot of ``lanes`` elements lands.
"""

from __future__ import annotations

from .banks import Banks
from .stats import Count

__all__ = ["Channel"]


class Channel(Banks):
    """Representative channel of one SPMD PIM stream."""

    # ---- column commands ---------------------------------------------------------
    def _col_time(self, banks: tuple[int, ...], groups: tuple[int, ...], trcd: int) -> int:
        is_open = self.is_open
        for b in banks:
            if not is_open[b]:
                self._fail("column access to a bank with no open row (activate it first):", b)
        g_col, act_t = self.g_col, self.act_t
        return max(self.last + 1, self.nb, self.any_col + self.tccd_s,
                   max([g_col[g] for g in groups]) + self.tccd_l,
                   max([act_t[b] for b in banks]) + trcd)

    def _cols(self, banks: tuple[int, ...], groups: tuple[int, ...], k: int, tl: int,
              times: list[int]) -> None:
        """Book ``k`` columns ending at ``tl`` on ``banks``: tCCD, row hits and misses."""
        fresh, nf = self.fresh, 0
        for b in banks:
            times[b] = tl
            if fresh[b]:
                fresh[b] = False
                nf += 1
        for g in groups:
            self.g_col[g] = tl
        self.any_col, self.last = tl, tl
        ctr = self.ctr
        ctr[Count.MISSES] += nf
        ctr[Count.HITS] += k * len(banks) - nf
        ctr[Count.COLS] += k * len(banks)
        ctr[Count.CMD_BUSY] += k

    def pim_col(self, env: dict, a: tuple) -> None:
        """Mac (``ncols`` columns) or Ew (one): all target banks' units, PIM column pipe."""
        code, banks, groups, units, n, slots, gb, span, *fmt = a
        if slots is None:
            g = gb.eval(env)
            slots = range(g // self.lanes, (g + span - 1) // self.lanes + 1)
        d, lanes, pj = (self.pcol, self.lanes, 0.0) if not fmt else self.fmt_col[fmt[0]]
        while n:
            u_col, gbr = self.u_col, self.gb
            t = max(self._col_time(banks, groups, self.trcd_mac),
                    max([u_col[u] for u in units]) + d, max([gbr[s] for s in slots], default=0))
            if t >= self.due:
                self.refresh()
                continue
            k = min(n, (self.due - 1 - t) // d + 1)
            tl = t + (k - 1) * d
            self._cols(banks, groups, k, tl, self.rd_t)
            fin = tl + self.maclat
            for u in units:
                self.u_col[u], self.u_done[u] = tl, fin
            self.done = max(self.done, fin)
            ctr = self.ctr
            ctr[code] += k
            if pj:  # a format's lane ops and dequantization, at its own energy
                ctr[Count.FORMAT_PJ] += k * len(banks) * lanes * pj
            else:
                ctr[Count.LANE_OPS] += k * len(banks) * lanes
            ctr[Count.PIM_BUSY] += k * d
            n -= k

    def wracc(self, env: dict, a: tuple) -> None:
        """Write a register into a column of each target bank, after its unit's pipeline."""
        banks, groups, units = a
        while True:
            t = self._col_time(banks, groups, self.trcd_wr)
            for u in units:
                t = max(t, self.u_done[u])
            if t < self.due:
                break
            self.refresh()
        self._cols(banks, groups, 1, t, self.wr_t)
        self.ctr[Count.WRACC] += 1

    def bank_io(self, env: dict, a: tuple) -> None:
        """RdBank / WrBank: ``ncols`` columns of one bank, each over the data bus."""
        code, bank, group, n = a
        banks, groups = (bank,), (group,)
        write = code == Count.WR
        lat, trcd = (self.cwl, self.trcd_wr) if write else (self.cl, self.trcd)
        d, x = self.tccd_l, self.col_xfer
        while n:
            t = self._col_time(banks, groups, trcd)
            if t >= self.due:
                self.refresh()
                continue
            k = min(n, (self.due - 1 - t) // d + 1)
            tl = t + (k - 1) * d
            self._cols(banks, groups, k, tl, self.wr_t if write else self.rd_t)
            self.bus = max(self.bus + k * x, t + lat + k * x, tl + lat + x)
            self.done = max(self.done, self.bus)
            ctr = self.ctr
            ctr[code] += k
            ctr[Count.BUS_BUSY] += k * x
            ctr[Count.OFFCHIP_BYTES] += k * self.col_bytes
            n -= k

    # ---- register and global-buffer commands -------------------------------------
    def _slot(self, extra: int = 0) -> int:
        """Issue cycle of a command with no bank constraint (after any due refresh)."""
        while True:
            t = max(self.last + 1, self.nb, extra)
            if t < self.due:
                self.last = t
                self.ctr[Count.CMD_BUSY] += 1
                return t
            self.refresh()

    def _transfer(self, start: int, nbytes: int) -> int:
        x = self.xfer(nbytes)
        self.bus = max(self.bus, start) + x
        self.done = max(self.done, self.bus)
        self.ctr[Count.BUS_BUSY] += x
        self.ctr[Count.OFFCHIP_BYTES] += nbytes
        return self.bus

    def wrgb(self, env: dict, a: tuple) -> None:
        nbytes, slots, gb, span = a
        if slots is None:
            g = gb.eval(env)
            slots = range(g // self.lanes, (g + span - 1) // self.lanes + 1)
        end = self._transfer(self._slot() + self.cwl, nbytes)
        for s in slots:
            self.gb[s] = end
        self.ctr[Count.WRGB] += 1
        self.ctr[Count.GB_BYTES] += nbytes

    def rdacc(self, env: dict, a: tuple) -> None:
        units, nregs, lanes = a
        t = self._slot(max(self.u_done[u] for u in units))
        per = lanes * self.lane_bytes if lanes else self.reg_bytes
        self._transfer(t + self.cl, len(units) * nregs * per)
        self.ctr[Count.RDACC] += 1

    def reg_op(self, env: dict, a: tuple) -> None:
        """ClrAcc (one slot) or Af (one slot, then the unit pipeline)."""
        code, units, lane_ops = a
        t = self._slot()
        if code == Count.AF:
            fin = t + self.pipe
            for u in units:
                self.u_done[u] = max(self.u_done[u], fin)
            self.done = max(self.done, fin)
        self.ctr[code] += 1
        self.ctr[Count.LANE_OPS] += lane_ops
