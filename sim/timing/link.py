"""The link engine of one device: sends queue on its ports; arrivals complete its signals.

A device has one port on a switch, or one port towards each neighbour on a ring. A send
of ``b`` bytes to a device ``h`` links away (``h = 0``: a local copy, free) waits for its
port, occupies it ``h * b / bandwidth`` ns (on a ring a flow's bytes cross ``h`` links,
and with the symmetric traffic of SPMD device groups each device's port carries as much
as its own flows put on the ring) and arrives ``h * latency_ns`` later. Sends issue
without waiting for one another; a Signal waits for every arrival.
"""

from __future__ import annotations

from ..hardware import Link
from .stats import N_COUNTERS, Count

__all__ = ["LinkEngine"]


class LinkEngine:
    """State of a link stream of the group's representative device (position 0)."""

    def __init__(self, name: str, link: Link | None) -> None:
        self.name, self.link = name, link
        self.t = 0.0  # issue time: the end of the last Wait
        self.done = 0.0  # latest arrival
        self.ports: dict[int, float] = {}  # direction -> time the port is free
        self.flights: list[tuple[float, float]] = []  # (start, arrival) per transfer
        self.ctr: list = [0] * N_COUNTERS
        self.learnt: dict = {}

    def send(self, env: dict, a: tuple) -> None:
        """``a`` = (bytes, peer Affine, source device, target devices, system size)."""
        nbytes, peer, src, targets, n = a
        dst = targets[peer.eval(env) % len(targets)]
        link = self.link
        hops = 0 if dst == src or link is None else link.hops(src, dst, n)
        if hops == 0:
            return
        way = 0 if link.topology == "switch" else (1 if (dst - src) % n <= n // 2 else -1)
        start = max(self.t, self.ports.get(way, 0.0))
        busy = hops * nbytes / link.bandwidth_gbps
        self.ports[way] = start + busy
        arrival = start + busy + hops * link.latency_ns
        self.done = max(self.done, arrival)
        self.flights.append((start, arrival))
        ctr = self.ctr
        ctr[Count.SENDS] += 1
        ctr[Count.LINK_BYTES] += nbytes
        ctr[Count.LINK_BUSY] += busy

    # ---- stream interface (engine) -------------------------------------------------
    def now(self) -> float:
        return self.t

    def signal_ns(self) -> float:
        return max(self.t, self.done)

    def wait_until(self, ns: float) -> None:
        self.t = max(self.t, ns)

    def signature(self, gb_dep: bool) -> None:
        """Never extrapolated: link loops are short (one send per peer)."""
        return None

    def shift(self, delta: float) -> None:
        self.t += delta

    def bound(self) -> float:
        return float("inf")
