"""The cost model's input: a fixed-length, family-independent vector per candidate.

Five groups of slots, named in :data:`FEATURE_NAMES` (``log`` is ``log2(1 + x)``; counts
per channel are on the busiest channel, see :mod:`cost_models.program_stats`): program
physics (the work each resource does), the analytical model (``sim.bound.bound`` and each
resource's share of it), the hardware's figures, the family one-hot, and the space's own
features hashed into ``SPACE_SLOTS`` signed slots (colliding features add up).
"""

from __future__ import annotations

import json
import math
import zlib
from pathlib import Path

import numpy as np

from sim.hardware import Hardware

from .base import Candidate
from .program_stats import program_stats

__all__ = ["FEATURE_NAMES", "FEATURE_VERSION", "SPACE_SLOTS", "featurize", "features",
           "useful_macs"]

FEATURE_VERSION = 1
SPACE_SLOTS = 16
_RESOURCES = ("cmd_bus", "column_pipe", "bank_group", "pim_unit", "data_bus", "host")
_PHYSICS = (
    "log_bus_bytes",  # data-bus bytes per channel: broadcast + read-out + bank I/O
    "log_commands",  # commands per channel, each column of a multi-column command
    "log_columns", "log_group_columns",  # column commands: per channel, busiest bank group
    "log_unit_columns",  # MAC / element-wise columns on the busiest PIM unit
    "log_bank_acts", "log_channel_acts",  # activations: busiest bank, summed over a channel
    "cols_per_act",  # PIM columns per activation in the busiest bank (row reuse)
    "log_gb_writes", "log_gb_bytes", "log_acc_bytes",  # broadcast and read-out traffic
    "log_lanes_issued", "log_useful_macs",  # MAC lane ops issued; MACs the workload needs
    "lane_util",  # useful / issued lanes (0 without MACs): padding waste
    "log_host_ops", "log_host_flops", "log_host_bytes",
    "log_transfer_bytes",  # bytes over every channel's bus, device total
    "log_channels", "channel_frac", "pim_streams",  # channels used (and their fraction)
)
# the bound, each resource's busiest-stream time over it, activation and tFAW times of the
# busiest bank and channel, and the bound stretched by the refresh duty
_BOUND = ("log_bound_ns", *(f"share_{r}" for r in _RESOURCES), "log_act_ns", "log_faw_ns",
          "log_bound_refresh_ns")
_HW = (
    "log_channel_gbps", "log_internal_gbps", "log_pim_gflops", "log_host_gflops",
    "log_host_gbps", "trcd_mac_ns", "trp_ns", "tras_ns", "tfaw_ns", "refresh_duty", "tck_ns",
    "pim_clock_ghz", "lanes", "registers", "log_gb_bytes_hw", "banks_per_unit", "adder_tree",
    "host_overhead_ns",
)
# The workload ops of FEATURE_VERSION 1's one-hot slots, in the shipped trees' order (data
# of the feature layout, beside this module); an op added since has all-zero family slots
# until the features are versioned and the model retrained.
FEATURE_FAMILIES: tuple[str, ...] = tuple(json.loads(
    (Path(__file__).with_name("feature_families.json")).read_text())[str(FEATURE_VERSION)])
FEATURE_NAMES: tuple[str, ...] = (
    *_PHYSICS, *_BOUND, *_HW, *(f"family={f}" for f in FEATURE_FAMILIES),
    *(f"space_h{i}" for i in range(SPACE_SLOTS)),
)


def _log(x: float) -> float:
    return math.log2(1.0 + max(x, 0.0))


def useful_macs(c: Candidate) -> float:
    """Multiply-accumulates the candidate's workload needs (its space says how many)."""
    return float(c.space.macs)


def _hardware(hw: Hardware) -> list[float]:
    t, tck = hw.timing, hw.org.tck_ns
    return [
        _log(hw.channel_bus_gbps), _log(hw.internal_bandwidth_gbps), _log(hw.pim_peak_gflops),
        _log(hw.host.peak_gflops), _log(hw.host.bandwidth_gbps), t.trcd_mac * tck,
        t.trp * tck, t.tras * tck, t.tfaw * tck, t.trfc / t.trefi, tck,
        hw.pim.clock_mhz / 1e3, float(hw.pim.lanes), float(hw.pim.registers),
        _log(hw.pim.global_buffer_bytes), float(hw.pim.banks_per_unit),
        float(hw.pim.adder_tree), hw.host.op_overhead_ns,
    ]


def _program_part(c: Candidate) -> np.ndarray:
    """Physics, bound and hardware slots: everything that depends on program and hardware."""
    hw = c.hw
    st = program_stats(c.program, hw)
    macs = useful_macs(c)
    phys = [
        _log(st.bus_bytes), _log(st.commands), _log(st.columns), _log(st.group_columns),
        _log(st.unit_columns), _log(st.bank_acts), _log(st.channel_acts),
        st.bank_columns / st.bank_acts if st.bank_acts else 0.0, _log(st.gb_writes),
        _log(st.gb_bytes), _log(st.acc_bytes), _log(st.lanes_issued), _log(macs),
        min(macs / st.lanes_issued, 1.0) if st.lanes_issued else 0.0, _log(st.host_ops),
        _log(st.host_flops), _log(st.host_bytes), _log(st.transfer_bytes), _log(st.channels),
        st.channels / hw.org.channels, float(st.pim_streams),
    ]
    b = st.bound
    share = dict.fromkeys(_RESOURCES, 0.0)
    for key, ns in b.resources.items():
        r = key.rsplit(":", 1)[-1]
        if r in share and b.ns > 0:
            share[r] = max(share[r], ns / b.ns)
    t, tck = hw.timing, hw.org.tck_ns
    duty = t.trfc / t.trefi
    bnd = [
        _log(b.ns), *share.values(), _log(st.bank_acts * (t.trcd_mac + t.trp) * tck),
        _log(st.channel_acts / 4 * t.tfaw * tck), _log(b.ns / (1.0 - min(duty, 0.5))),
    ]
    return np.asarray([*phys, *bnd, *_hardware(hw)], dtype=np.float64)


def _slot(name: str) -> tuple[int, float]:
    h = zlib.crc32(name.encode())
    return h % SPACE_SLOTS, (1.0 if (h >> 16) & 1 else -1.0)


def _space_part(c: Candidate) -> np.ndarray:
    out = np.zeros(SPACE_SLOTS)
    vals = c.space.features(c.point_dict)
    for name, v in zip(c.space.feature_names(), vals, strict=True):
        i, sign = _slot(name)
        out[i] += sign * math.copysign(_log(abs(float(v))), v)
    return out


def features(c: Candidate) -> np.ndarray:
    """The feature vector of one candidate (length ``len(FEATURE_NAMES)``), read-only.

    Computed once per candidate object and kept on it (a candidate is immutable), so a
    search that ranks a candidate in several rounds and then trains on it walks its
    program once; hashing the program for a global cache would cost as much as the walk.
    """
    hit = c.__dict__.get("_features")
    if hit is not None:
        return hit
    fam = np.asarray([1.0 if c.workload.op == f else 0.0 for f in FEATURE_FAMILIES])
    vec = np.concatenate([_program_part(c), fam, _space_part(c)])
    vec.setflags(write=False)
    c.__dict__["_features"] = vec  # frozen dataclass: a memo, not a field
    return vec


def featurize(candidates: list[Candidate] | tuple[Candidate, ...]) -> np.ndarray:
    """``[len(candidates), len(FEATURE_NAMES)]`` float matrix."""
    if not candidates:
        return np.zeros((0, len(FEATURE_NAMES)))
    return np.stack([features(c) for c in candidates])
