"""Analytical lower bound of a program: each resource's work over its peak rate.

Resources per PIM stream (one representative channel; all channels of a stream are
alike): the command bus (one command per cycle), the column pipe of each bank group
(tCCD_L between its column commands) and of the channel (tCCD_S), each PIM unit's
datapath, and the channel's data bus. The host is one in-order engine, so its ops'
roofline times add up. The bound is the largest of these; no schedule of the same
program can finish sooner, and the cycle-level simulator never reports less.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .hardware import DTYPE_BYTES, Hardware, require_hardware
from .host_ops import cost
from .isa import Act, Ew, HostOp, Mac, RdAcc, RdBank, WrAcc, WrBank, WrGb
from .program import Program, Stream, walk

__all__ = ["Bound", "ChannelWork", "bound", "host_op_ns", "refresh_span_ns"]


@dataclass(frozen=True)
class Bound:
    """``ns`` is the bound; ``resources`` maps "stream:resource" to its busy time in ns."""

    ns: float
    resources: dict[str, float]

    @property
    def binding(self) -> str:
        """The resource that sets the bound."""
        return max(self.resources, key=self.resources.__getitem__) if self.resources else ""


def refresh_span_ns(hw: Hardware, busy_ns: float) -> float:
    """The least time that holds ``busy_ns`` of bank work (activations, precharges and
    column commands, which an all-bank refresh stops): a span of ``T`` holds at least
    ``floor(T / tREFI)`` refresh due times whatever its phase, and each blocks the banks
    for ``tRFC``; the smallest ``T = busy + tRFC * floor(T / tREFI)``."""
    t, tck = hw.timing, hw.org.tck_ns
    refi, rfc = t.trefi * tck, t.trfc * tck
    if busy_ns <= 0 or refi <= 0 or rfc <= 0 or rfc >= refi:
        return max(busy_ns, 0.0)
    span = busy_ns
    while (nxt := busy_ns + rfc * math.floor(span / refi)) > span:
        span = nxt
    return span


def host_op_ns(op: HostOp, hw: Hardware, dtypes: dict[str, str]) -> float:
    """Roofline time of one host op, dispatch overhead included."""
    return hw.host.op_ns(*cost(op, dtypes))


class ChannelWork:
    """The work of one representative channel of a PIM stream, counted by one walk
    (``walk(stream.body, work.add)``): commands (every column of a multi-column command),
    column commands per bank group and per PIM unit, activations and PIM-op columns per
    bank, global-buffer writes, data-bus bytes by kind, and MAC lane operations. The
    bound reads its resources from it; ``cost_models.program_stats`` its features."""

    def __init__(self, hw: Hardware) -> None:
        self.hw = hw
        nb = hw.org.banks_per_channel
        self.commands = self.columns = self.gb_writes = 0
        self.gb_bytes = self.acc_bytes = self.io_bytes = self.lanes = 0.0
        self.group_cols = [0] * hw.org.bank_groups
        self.unit_cols = [0] * hw.units_per_channel
        self.unit_ns = [0.0] * hw.units_per_channel  # unit busy time of its columns
        self.bank_acts = [0] * nb
        self.bank_cols = [0] * nb

    @property
    def bus_bytes(self) -> float:
        """Bytes over the channel's data bus: global-buffer writes, read-outs, bank I/O."""
        return self.gb_bytes + self.acc_bytes + self.io_bytes

    def add(self, ins: object, mult: int) -> None:
        hw = self.hw
        ncols = getattr(ins, "ncols", 1)
        self.commands += mult * (ncols if isinstance(ins, Mac | RdBank | WrBank) else 1)
        if isinstance(ins, Act):
            for b in hw.bank_targets(ins.bank, ins.step):
                self.bank_acts[b] += mult
        elif isinstance(ins, Mac | Ew | WrAcc | RdBank | WrBank):
            banks = hw.bank_targets(ins.bank, getattr(ins, "step", 0))
            cols = mult * ncols
            self.columns += cols
            for g in {b // hw.banks_per_group for b in banks}:
                self.group_cols[g] += cols
            units = {b // hw.pim.banks_per_unit for b in banks}
            if isinstance(ins, Mac | Ew):
                col_ns = _unit_ns(hw, getattr(ins, "fmt", ""))
                for u in units:
                    self.unit_cols[u] += cols
                    self.unit_ns[u] += cols * col_ns
                for b in banks:
                    self.bank_cols[b] += cols
            if isinstance(ins, Mac):
                self.lanes += cols * len(units) * hw.pim.lanes * hw.density(ins.fmt)
            elif isinstance(ins, RdBank | WrBank):
                self.io_bytes += cols * hw.org.column_bytes
        elif isinstance(ins, WrGb):
            self.gb_writes += mult
            self.gb_bytes += mult * ins.src.size * hw.elem_bytes
        elif isinstance(ins, RdAcc):
            units = len({b // hw.pim.banks_per_unit for b in hw.bank_targets(ins.bank, ins.step)})
            regs = units * ins.nregs * (ins.lanes or hw.pim.register_lanes)
            self.acc_bytes += mult * regs * DTYPE_BYTES[hw.pim.accum_dtype]

    def resources(self) -> dict[str, float]:
        hw, t, tck = self.hw, self.hw.timing, self.hw.org.tck_ns
        # every unit's column time but its first column's
        first = min(_unit_ns(hw, f) for f in ("", *hw.formats.weights))
        unit_ns = [t - first if c else 0.0 for t, c in zip(self.unit_ns, self.unit_cols,
                                                          strict=True)]
        return {
            "cmd_bus": max(self.commands - 1, 0) * tck,
            "column_pipe": max(self.columns - 1, 0) * t.tccd_s * tck,
            "bank_group": max((max(c - 1, 0) for c in self.group_cols), default=0) * t.tccd_l * tck,
            "pim_unit": max((max(t, 0.0) for t in unit_ns), default=0.0),
            "data_bus": self.bus_bytes / hw.channel_bus_gbps,
        }


def _unit_ns(hw: Hardware, fmt: str) -> float:
    """A unit's cycles for one column of weights of ``fmt`` ("" for ``pim.dtype``)."""
    lanes = hw.formats.lanes(fmt) if fmt else hw.pim.lanes
    return hw.column_elems * hw.density(fmt) / lanes * 1e3 / hw.pim.clock_mhz


def _stream_resources(s: Stream, hw: Hardware, dtypes: dict[str, str]) -> dict[str, float]:
    if s.engine == "host":
        total = [0.0]

        def visit(n: object, mult: int) -> None:
            if isinstance(n, HostOp):
                total[0] += mult * host_op_ns(n, hw, dtypes)

        walk(s.body, visit)
        return {"host": total[0]}
    work = ChannelWork(hw)
    walk(s.body, work.add)
    return work.resources()


def bound(program: Program, hw: Hardware) -> Bound:
    """The analytical lower bound of ``program`` on ``hw``."""
    hw = require_hardware(hw, "bound")
    dtypes = {b.name: b.dtype for b in program.buffers}
    res: dict[str, float] = {}
    for s in program.streams:
        for k, v in _stream_resources(s, hw, dtypes).items():
            res[f"{s.name}:{k}"] = v
    return Bound(max(res.values(), default=0.0), res)
