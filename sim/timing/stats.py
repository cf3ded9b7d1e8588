"""Integer event counters shared by the channel and host engines.

Every statistic a stream produces is a counter in one flat list, so a loop's per-iteration
delta is a list difference and extrapolation adds ``periods * delta``. Energy and the
result are computed from the counters once, at the end.
"""

from __future__ import annotations

__all__ = ["MNEMONICS", "N_COUNTERS", "Count"]

# Hardware commands counted per mnemonic (each column of a multi-column op counts once).
MNEMONICS = ("act", "pre", "mac", "ew", "af", "clr", "wracc", "wrgb", "rdacc", "rd", "wr", "host")


class Count:
    """Counter indices: one per mnemonic, then events."""

    ACT, PRE, MAC, EW, AF, CLR, WRACC, WRGB, RDACC, RD, WR, HOST = range(12)
    BANK_ACTS = 12  # banks activated (program Acts and re-activations after refresh)
    COLS = 13  # bank column accesses
    LANE_OPS = 14  # lane multiply-accumulates (Mac, Ew) and lane ops (Af)
    GB_BYTES = 15  # bytes written into the global buffer
    OFFCHIP_BYTES = 16  # bytes over the external data bus
    HITS = 17
    MISSES = 18
    REFRESHES = 19
    BUS_BUSY = 20  # data bus occupancy, cycles
    PIM_BUSY = 21  # PIM column pipe occupancy, cycles
    CMD_BUSY = 22  # command bus slots used, cycles (refresh Pre/Act included)
    HOST_FLOPS = 23  # host floating-point operations (float)
    HOST_BYTES = 24  # host bytes moved (float)
    HOST_BUSY = 25  # host busy time, ns (float)
    SENDS = 26  # link transfers (local copies excluded)
    LINK_BYTES = 27  # bytes sent over the link
    LINK_BUSY = 28  # link port occupancy, ns (float)
    FORMAT_PJ = 29  # energy of integer-format lane ops and dequantization, pJ (float)


N_COUNTERS = 30
