"""The simulator's answer: a frozen, JSON-serialisable record built from stream states."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from ..hardware import Hardware
from .channel import Channel
from .energy import energy_breakdown
from .host import HostEngine
from .stats import MNEMONICS, N_COUNTERS, Count

__all__ = ["SimResult", "build_result"]


@dataclass(frozen=True)
class SimResult:
    """Latency, energy and event counts of one program, summed over every channel.

    ``utilisation`` is the fraction of the latency each resource was busy, averaged over
    the channels the program's PIM streams use ("cmd_bus", "data_bus", "pim") and the
    host streams ("host"). ``commands`` counts each column of a multi-column command.
    """

    latency_ns: float
    energy_pj: float
    energy_breakdown: dict[str, float]
    utilisation: dict[str, float]
    row_hits: int
    row_misses: int
    commands: dict[str, int]
    total_commands: int
    refreshes: int
    stream_end_ns: dict[str, float]

    def to_dict(self) -> dict:
        return asdict(self)


def build_result(hw: Hardware, states: list[tuple[int, Channel | HostEngine]],
                 order: list[str]) -> SimResult:
    """Combine ``(channel count, state)`` per simulated stream (0 channels for host
    streams); a state stands for the streams named in its ``members``, and
    ``stream_end_ns`` lists the stream names in ``order``."""
    total: list = [0] * N_COUNTERS
    end = {m: st.signal_ns() for _, st in states for m in st.members}
    ends = {name: end[name] for name in order}
    latency = max(ends.values(), default=0.0)
    pim_ch = sum(n for n, st in states if isinstance(st, Channel))
    hosts = sum(len(st.members) for _, st in states if isinstance(st, HostEngine))
    for n, st in states:
        k = n if isinstance(st, Channel) else 1
        for i, v in enumerate(st.ctr):
            total[i] += v * k
    tck = hw.org.tck_ns

    def frac(busy: float, width: int) -> float:
        return busy / (latency * width) if latency > 0 and width else 0.0

    energy = energy_breakdown(hw, total, latency)
    commands = {m: int(total[i]) for i, m in enumerate(MNEMONICS) if total[i]}
    return SimResult(
        latency_ns=latency,
        energy_pj=sum(energy.values()),
        energy_breakdown=energy,
        utilisation={
            "cmd_bus": frac(total[Count.CMD_BUSY] * tck, pim_ch),
            "data_bus": frac(total[Count.BUS_BUSY] * tck, pim_ch),
            "pim": frac(total[Count.PIM_BUSY] * tck, pim_ch),
            "host": frac(total[Count.HOST_BUSY], hosts),
        },
        row_hits=int(total[Count.HITS]),
        row_misses=int(total[Count.MISSES]),
        commands=commands,
        total_commands=sum(commands.values()),
        refreshes=int(total[Count.REFRESHES]),
        stream_end_ns=ends,
    )
