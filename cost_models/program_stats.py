"""Physics counts of a lowered program, gathered by one walk with loop multiplicities.

Each PIM stream runs the same body on every channel of its channel tuple, so one walk of
the body gives the counts of one representative channel; device totals multiply by the
stream's channel count. Per-channel figures of a program are the maximum over its PIM
streams (the busiest channel sets the pace). Host streams contribute op counts, FLOPs and
bytes from ``sim.host_ops.cost``.
"""

from __future__ import annotations

from dataclasses import dataclass

from sim.hardware import DTYPE_BYTES, Hardware
from sim.host_ops import cost
from sim.isa import Act, Ew, HostOp, Mac, RdAcc, RdBank, WrAcc, WrBank, WrGb
from sim.program import Node, Program, walk

__all__ = ["ProgramStats", "program_stats"]


@dataclass
class ProgramStats:
    """Counts of one program on one hardware (per-channel ones on the busiest channel)."""

    channels: int = 0  # channels used by PIM streams
    pim_streams: int = 0
    commands: float = 0.0  # per channel, every column of a multi-column command counted
    columns: float = 0.0  # column commands per channel
    group_columns: float = 0.0  # on the busiest bank group
    unit_columns: float = 0.0  # MAC / element-wise columns on the busiest unit
    bank_acts: float = 0.0  # row activations of the busiest bank
    bank_columns: float = 0.0  # columns read by PIM ops in the busiest bank
    channel_acts: float = 0.0  # bank activations summed over a channel's banks
    gb_writes: float = 0.0  # global-buffer write commands per channel
    gb_bytes: float = 0.0
    acc_bytes: float = 0.0  # accumulator read-out bytes per channel
    bank_io_bytes: float = 0.0  # plain bank reads/writes to the host per channel
    lanes_issued: float = 0.0  # MAC lane operations over the whole device
    host_ops: float = 0.0
    host_flops: float = 0.0
    host_bytes: float = 0.0
    transfer_bytes: float = 0.0  # bytes over every channel's data bus, device total

    @property
    def bus_bytes(self) -> float:
        """Data-bus bytes of the busiest channel."""
        return self.gb_bytes + self.acc_bytes + self.bank_io_bytes


class _Channel:
    """Counts of one representative channel of one PIM stream."""

    def __init__(self, hw: Hardware) -> None:
        self.hw = hw
        nb = hw.org.banks_per_channel
        self.cmds = self.cols = self.gbw = self.gbb = self.accb = self.iob = self.lanes = 0.0
        self.group = [0.0] * hw.org.bank_groups
        self.unit = [0.0] * hw.units_per_channel
        self.acts = [0.0] * nb
        self.bcols = [0.0] * nb

    def visit(self, ins: Node, mult: int) -> None:
        hw = self.hw
        ncols = getattr(ins, "ncols", 1)
        self.cmds += mult * (ncols if isinstance(ins, Mac | RdBank | WrBank) else 1)
        if isinstance(ins, Act):
            for b in hw.bank_targets(ins.bank, ins.step):
                self.acts[b] += mult
        elif isinstance(ins, Mac | Ew | WrAcc | RdBank | WrBank):
            banks = hw.bank_targets(ins.bank, getattr(ins, "step", 0))
            cols = mult * ncols
            self.cols += cols
            for g in {b // hw.banks_per_group for b in banks}:
                self.group[g] += cols
            units = {b // hw.pim.banks_per_unit for b in banks}
            if isinstance(ins, Mac | Ew):
                for u in units:
                    self.unit[u] += cols
                for b in banks:
                    self.bcols[b] += cols
            if isinstance(ins, Mac):
                self.lanes += cols * len(units) * hw.pim.lanes
            elif isinstance(ins, RdBank | WrBank):
                self.iob += cols * hw.org.column_bytes
        elif isinstance(ins, WrGb):
            self.gbw += mult
            self.gbb += mult * ins.src.size * hw.elem_bytes
        elif isinstance(ins, RdAcc):
            units = len({b // hw.pim.banks_per_unit for b in hw.bank_targets(ins.bank, ins.step)})
            regs = units * ins.nregs * hw.pim.register_lanes
            self.accb += mult * regs * DTYPE_BYTES[hw.pim.accum_dtype]


def program_stats(program: Program, hw: Hardware) -> ProgramStats:
    """Walk every stream of ``program`` once and return its :class:`ProgramStats`."""
    st = ProgramStats()
    dtypes = {b.name: b.dtype for b in program.buffers}

    def host(n: Node, mult: int) -> None:
        if isinstance(n, HostOp):
            flops, nbytes = cost(n, dtypes)
            st.host_ops += mult
            st.host_flops += mult * flops
            st.host_bytes += mult * nbytes

    for s in program.streams:
        if s.engine == "host":
            walk(s.body, host)
            continue
        c = _Channel(hw)
        walk(s.body, c.visit)
        nch = len(s.channels)
        st.channels += nch
        st.pim_streams += 1
        st.commands = max(st.commands, c.cmds)
        st.columns = max(st.columns, c.cols)
        st.group_columns = max(st.group_columns, max(c.group, default=0.0))
        st.unit_columns = max(st.unit_columns, max(c.unit, default=0.0))
        st.bank_acts = max(st.bank_acts, max(c.acts, default=0.0))
        st.bank_columns = max(st.bank_columns, max(c.bcols, default=0.0))
        st.channel_acts = max(st.channel_acts, sum(c.acts))
        st.gb_writes = max(st.gb_writes, c.gbw)
        st.gb_bytes = max(st.gb_bytes, c.gbb)
        st.acc_bytes = max(st.acc_bytes, c.accb)
        st.bank_io_bytes = max(st.bank_io_bytes, c.iob)
        st.lanes_issued += c.lanes * nch
        st.transfer_bytes += (c.gbb + c.accb + c.iob) * nch
    return st
