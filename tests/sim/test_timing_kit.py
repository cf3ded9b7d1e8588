"""Shared fixtures for the timing tests: an easy device and program builders (no tests)."""

from __future__ import annotations

import copy

from sim.hardware import Hardware
from sim.hwio import load_hardware
from sim.isa import BufRef, HostOp
from sim.program import Buffer, Node, Program, Stream

# Round numbers, tck = 1 ns, so every latency below is a sum worked out by hand:
# 8 banks in 2 groups of 4, one unit per bank, burst 4 (2 cycles), PIM column every 5
# cycles (200 MHz unit, 16 lanes), MAC pipeline 3 unit cycles = 15 cycles, bus 8 GB/s
# (a 32-byte column in 4 cycles), registers of 16 fp32 lanes (64 bytes).
EASY = {
    "org": {"channels": 4, "banks_per_channel": 8, "bank_groups": 2, "rows_per_bank": 64,
            "row_bytes": 1024, "column_bytes": 32, "burst_length": 4, "tck_ns": 1.0},
    "timing": {"trcd": 10, "trcd_wr": 6, "trcd_mac": 12, "trp": 8, "tras": 20, "cl": 5,
               "cwl": 3, "tccd_s": 2, "tccd_l": 4, "trrd_s": 3, "trrd_l": 5, "tfaw": 30,
               "twr": 7, "trtp": 3, "trfc": 50, "trefi": 100000},
    "pim": {"banks_per_unit": 1, "lanes": 16, "clock_mhz": 200.0, "mac_latency_cycles": 3,
            "registers": 4, "register_lanes": 16, "adder_tree": True, "dtype": "bf16",
            "accum_dtype": "fp32", "global_buffer_bytes": 256, "elementwise": True,
            "activation_functions": ["relu"]},
    "bus": {"width_bits": 32, "data_rate_gbps": 2.0},
    "host": {"peak_gflops": 1.0, "bandwidth_gbps": 10.0, "op_overhead_ns": 200.0,
             "dtype": "fp32"},
    "energy": {"activate_pj": 100.0, "column_pj": 10.0, "mac_pj": 1.0,
               "gb_write_pj_per_byte": 2.0, "offchip_pj_per_bit": 0.5, "refresh_pj": 1000.0,
               "host_pj_per_flop": 0.25, "host_pj_per_byte": 0.5, "static_mw": 1.0},
}
BUFFERS = (Buffer("x", "fp32", 4096), Buffer("y", "fp32", 4096), Buffer("z", "fp32", 4096))


def easy_hw(**changes: float) -> Hardware:
    """The easy device with ``section__field=value`` changes."""
    d = copy.deepcopy(EASY)
    d["name"] = "easy"
    for key, v in changes.items():
        section, name = key.split("__")
        d[section][name] = v
    return load_hardware(d)


def pim(*body: Node, channels: tuple[int, ...] = (0,), name: str = "pim") -> Stream:
    return Stream(name, "pim", channels, tuple(body))


def host(*body: Node, name: str = "host") -> Stream:
    return Stream(name, "host", (), tuple(body))


def prog(*streams: Stream) -> Program:
    return Program(tuple(streams), BUFFERS)


def ref(n: int, buf: str = "x") -> BufRef:
    return BufRef(buf, 0, (n,))


def add_op(n: int) -> HostOp:
    """Host z = x + y over n fp32: n FLOPs, 12 n bytes."""
    return HostOp("add", (ref(n, "z"),), (ref(n, "x"), ref(n, "y")))
