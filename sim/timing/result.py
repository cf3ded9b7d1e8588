"""The simulator's answer: a frozen, JSON-serialisable record built from stream states."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from ..hardware import Hardware
from .channel import Channel
from .energy import energy_breakdown
from .host import HostEngine
from .link import LinkEngine
from .stats import MNEMONICS, N_COUNTERS, Count

__all__ = ["SimResult", "SystemResult", "build_result", "system_result"]


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
    link: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)


def _flight_ns(states: list) -> float:
    """Time during which a transfer of a link stream was in flight (intervals merged)."""
    spans = sorted(f for _, st in states if isinstance(st, LinkEngine) for f in st.flights)
    total, end = 0.0, -1.0
    for a, b in spans:
        if b > end:
            total += b - max(a, end)
            end = b
    return total


def build_result(hw: Hardware, states: list[tuple[int, Channel | HostEngine | LinkEngine]],
                 order: list[str], devices: int = 1) -> SimResult:
    """Combine ``(channel count, state)`` per simulated stream (0 channels for host and
    link streams) of a group of ``devices`` alike devices (counters and energy are
    multiplied by it); a state stands for the streams named in its ``members``, and
    ``stream_end_ns`` lists the stream names in ``order``. ``link`` holds sends, bytes
    and the time a transfer was in flight (``flight_ns``), per device."""
    total: list = [0] * N_COUNTERS
    end = {m: st.signal_ns() for _, st in states for m in st.members}
    ends = {name: end[name] for name in order}
    latency = max(ends.values(), default=0.0)
    pim_ch = sum(n for n, st in states if isinstance(st, Channel))
    hosts = sum(len(st.members) for _, st in states if isinstance(st, HostEngine))
    for n, st in states:
        k = (n if isinstance(st, Channel) else 1) * devices
        for i, v in enumerate(st.ctr):
            total[i] += v * k
    tck = hw.org.tck_ns

    def frac(busy: float, width: int) -> float:
        return busy / (latency * width * devices) if latency > 0 and width else 0.0

    energy = energy_breakdown(hw, total, latency * devices)
    link = {"sends": total[Count.SENDS] / devices, "bytes": total[Count.LINK_BYTES] / devices,
            "busy_ns": total[Count.LINK_BUSY] / devices, "flight_ns": _flight_ns(states)}
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
        link=link if total[Count.SENDS] else {},
    )


@dataclass(frozen=True)
class SystemResult:
    """A system program's latency and energy, each group's result (summed over its
    devices), and the communication: ``comm_ns`` is the longest time any group had a
    transfer in flight, ``comm_share`` its fraction of the latency."""

    latency_ns: float
    energy_pj: float
    groups: tuple[SimResult, ...]
    devices: tuple[int, ...]
    comm_ns: float
    link_bytes: float

    @property
    def comm_share(self) -> float:
        return self.comm_ns / self.latency_ns if self.latency_ns > 0 else 0.0

    def to_dict(self) -> dict:
        return {"latency_ns": self.latency_ns, "energy_pj": self.energy_pj,
                "devices": list(self.devices), "comm_ns": self.comm_ns,
                "comm_share": self.comm_share, "link_bytes": self.link_bytes,
                "groups": [g.to_dict() for g in self.groups]}


def system_result(groups: list[SimResult], devices: list[int]) -> SystemResult:
    """Combine per-group results (``devices[i]`` devices in group i)."""
    return SystemResult(
        latency_ns=max((g.latency_ns for g in groups), default=0.0),
        energy_pj=sum(g.energy_pj for g in groups),
        groups=tuple(groups), devices=tuple(devices),
        comm_ns=max((g.link.get("flight_ns", 0.0) for g in groups), default=0.0),
        link_bytes=sum(g.link.get("bytes", 0.0) * d for g, d in zip(groups, devices,
                                                                      strict=True)))
