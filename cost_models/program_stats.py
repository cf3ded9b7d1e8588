"""Physics counts of a lowered program, gathered by one walk with loop multiplicities.

Each PIM stream runs the same body on every channel of its channel tuple, so one walk of
the body (:class:`sim.bound.ChannelWork`, the counts the bound reads too) gives the counts
of one representative channel; device totals multiply by the
stream's channel count. Per-channel figures of a program are the maximum over its PIM
streams (the busiest channel sets the pace). Host streams contribute op counts, FLOPs and
bytes from ``sim.host_ops.cost``. The same walk gives the analytical bound
(``ProgramStats.bound``, equal to ``sim.bound.bound`` of the program), so featurising a
candidate walks its program once.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sim.bound import Bound, ChannelWork
from sim.hardware import Hardware
from sim.host_ops import cost
from sim.isa import HostOp
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
    bound: Bound = field(default_factory=lambda: Bound(0.0, {}))  # sim.bound.bound's answer

    @property
    def bus_bytes(self) -> float:
        """Data-bus bytes of the busiest channel."""
        return self.gb_bytes + self.acc_bytes + self.bank_io_bytes


def program_stats(program: Program, hw: Hardware) -> ProgramStats:
    """Walk every stream of ``program`` once and return its :class:`ProgramStats`."""
    st = ProgramStats()
    dtypes = {b.name: b.dtype for b in program.buffers}
    res: dict[str, float] = {}
    host_ns = [0.0]

    def host(n: Node, mult: int) -> None:
        if isinstance(n, HostOp):
            flops, nbytes = cost(n, dtypes)
            st.host_ops += mult
            st.host_flops += mult * flops
            st.host_bytes += mult * nbytes
            host_ns[0] += mult * hw.host.op_ns(flops, nbytes)

    for s in program.streams:
        if s.engine == "host":
            host_ns[0] = 0.0
            walk(s.body, host)
            res[f"{s.name}:host"] = host_ns[0]
            continue
        c = ChannelWork(hw)
        walk(s.body, c.add)
        res.update((f"{s.name}:{k}", v) for k, v in c.resources().items())
        nch = len(s.channels)
        st.channels += nch
        st.pim_streams += 1
        st.commands = max(st.commands, c.commands)
        st.columns = max(st.columns, c.columns)
        st.group_columns = max(st.group_columns, max(c.group_cols, default=0))
        st.unit_columns = max(st.unit_columns, max(c.unit_cols, default=0))
        st.bank_acts = max(st.bank_acts, max(c.bank_acts, default=0))
        st.bank_columns = max(st.bank_columns, max(c.bank_cols, default=0))
        st.channel_acts = max(st.channel_acts, sum(c.bank_acts))
        st.gb_writes = max(st.gb_writes, c.gb_writes)
        st.gb_bytes = max(st.gb_bytes, c.gb_bytes)
        st.acc_bytes = max(st.acc_bytes, c.acc_bytes)
        st.bank_io_bytes = max(st.bank_io_bytes, c.io_bytes)
        st.lanes_issued += c.lanes * nch
        st.transfer_bytes += c.bus_bytes * nch
    st.bound = Bound(max(res.values(), default=0.0), res)
    return st
