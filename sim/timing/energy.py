"""Energy from event counters: one figure per event kind, plus static power."""

from __future__ import annotations

from ..hardware import Hardware
from .stats import Count

__all__ = ["energy_breakdown"]


def energy_breakdown(hw: Hardware, total: list, latency_ns: float) -> dict[str, float]:
    """Picojoules per kind from device-wide counters (all channels summed).

    Off-chip bytes include global-buffer writes, accumulator and bank reads and bank
    writes; ``static_mw * latency_ns`` is in pJ (mW x ns).
    """
    e = hw.energy
    return {
        "activate": total[Count.BANK_ACTS] * e.activate_pj,
        "column": total[Count.COLS] * e.column_pj,
        "mac": total[Count.LANE_OPS] * e.mac_pj + total[Count.FORMAT_PJ],
        "gb_write": total[Count.GB_BYTES] * e.gb_write_pj_per_byte,
        "offchip": total[Count.OFFCHIP_BYTES] * 8 * e.offchip_pj_per_bit,
        "refresh": total[Count.REFRESHES] * e.refresh_pj,
        "host": (total[Count.HOST_FLOPS] * e.host_pj_per_flop
                 + total[Count.HOST_BYTES] * e.host_pj_per_byte),
        "static": e.static_mw * latency_ns,
    }
