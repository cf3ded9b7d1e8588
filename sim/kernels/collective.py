"""Collectives over a device group: all-reduce and all-gather of a host vector.

Each is a program for one device of the group (SPMD over devices): a link stream sends,
the host waits for every device's sends (a token counts once every device of the group
signalled it) and reduces. Algorithms:

* ``one_shot`` all-reduce: every device sends its whole vector to every device, which
  sums the ``n`` copies (one start-up, ``(n-1) x size`` bytes per port);
* ``two_shot`` all-reduce: reduce-scatter (device ``j`` receives everyone's ``j``-th
  chunk and sums it) then all-gather of the sums (two start-ups, ``2 (n-1) / n x size``
  bytes per port);
* all-gather: every device sends its vector into slot ``dev`` of everyone's result.

``collective_ns`` estimates an algorithm's time from the link and the host, so a caller
can pick the faster one; the timing simulator times the program itself.
"""

from __future__ import annotations

from functools import partial

from ..hardware import Hardware, Link
from ..isa import BufRef, HostOp, Send, Signal, Wait, aff
from ..program import Buffer, Loop, Program, Stream
from .base import Kernel, ceil_div

__all__ = ["ALGORITHMS", "all_gather", "all_reduce", "collective_ns"]

ALGORITHMS = ("one_shot", "two_shot")


def _no_weights(mem: object, tensors: dict) -> None:
    """Collectives place nothing in the banks."""


def _send_all(src: BufRef, dst: str, slot: int, n: int) -> Loop:
    """Send ``src`` to every device ``j`` of the group, into ``dst`` at ``dev * slot``
    (``j`` = 0 .. n-1; the device's own slot is a local copy)."""
    window = BufRef(dst, aff(0, dev=slot), src.shape)
    return Loop("j", n, (Send(src, window, aff(0, j=1)),))


def all_reduce(n: int, size: int, algorithm: str = "one_shot") -> Kernel:
    """``y[size]`` = the sum over the group's ``n`` devices of their ``x[size]`` (fp32)."""
    if algorithm == "one_shot" or n == 1:
        link = (_send_all(BufRef("x", aff(0), (size,)), "gath", size, n), Signal("sent"))
        host = (Wait(("sent",)), HostOp("reduce_sum", (BufRef("y", aff(0), (size,)),),
                                        (BufRef("gath", aff(0), (n, size)),), (("axis", 0),)))
        bufs = (Buffer("x", "fp32", size), Buffer("gath", "fp32", n * size),
                Buffer("y", "fp32", size))
    else:
        c = ceil_div(size, n)
        scatter = Loop("j", n, (Send(BufRef("x", aff(0, j=c), (c,)),
                                     BufRef("rs", aff(0, dev=c), (c,)), aff(0, j=1)),))
        link = (scatter, Signal("scattered"), Wait(("reduced",)),
                _send_all(BufRef("mine", aff(0), (c,)), "y", c, n), Signal("gathered"))
        host = (Wait(("scattered",)),
                HostOp("reduce_sum", (BufRef("mine", aff(0), (c,)),),
                       (BufRef("rs", aff(0), (n, c)),), (("axis", 0),)),
                Signal("reduced"), Wait(("gathered",)))
        bufs = (Buffer("x", "fp32", n * c), Buffer("rs", "fp32", n * c),
                Buffer("mine", "fp32", c), Buffer("y", "fp32", n * c))
    prog = Program((Stream("link", "link", (), link), Stream("host", "host", (), host)), bufs,
                   name=f"all_reduce_{algorithm}_{n}x{size}")
    return Kernel(prog, ("x",), "y", (size,), partial(_no_weights),
                  input_shapes=((size,),), padded_shapes=((bufs[0].size,),))


def all_gather(n: int, size: int) -> Kernel:
    """``y[n, size]``: row ``i`` is device ``i``'s ``x[size]`` (fp32)."""
    link = (_send_all(BufRef("x", aff(0), (size,)), "y", size, n), Signal("sent"))
    prog = Program((Stream("link", "link", (), link),
                    Stream("host", "host", (), (Wait(("sent",)),))),
                   (Buffer("x", "fp32", size), Buffer("y", "fp32", n * size)),
                   name=f"all_gather_{n}x{size}")
    return Kernel(prog, ("x",), "y", (n, size), partial(_no_weights),
                  input_shapes=((size,),), padded_shapes=((size,),))


def _sends_ns(link: Link | None, nbytes: float, n: int) -> float:
    """Device 0 sending ``nbytes`` to each other device of ``n`` (port-serialised)."""
    if link is None:
        return 0.0
    ports: dict[int, float] = {}
    end = 0.0
    for j in range(1, n):
        h = link.hops(0, j, n)
        way = 0 if link.topology == "switch" else (1 if j <= n // 2 else -1)
        ports[way] = ports.get(way, 0.0) + h * nbytes / link.bandwidth_gbps
        end = max(end, ports[way] + h * link.latency_ns)
    return end


def collective_ns(kind: str, n: int, size: int, link: Link | None, hw: Hardware,
                  algorithm: str = "one_shot") -> float:
    """Estimated time of the program of a collective of ``size`` fp32 elements over ``n``
    devices (``link`` None: a single device, no transfer)."""
    h = hw.host

    def reduce_ns(elems: int, out: int) -> float:
        return h.op_ns(elems, 4 * (elems + out))

    if kind == "all_gather":
        return _sends_ns(link, 4 * size, n)
    if algorithm == "one_shot" or n == 1:
        return _sends_ns(link, 4 * size, n) + reduce_ns(n * size, size)
    c = ceil_div(size, n)
    return 2 * _sends_ns(link, 4 * c, n) + reduce_ns(n * c, c)
