"""The hardware description: a frozen dataclass tree with units in every field name.

``Hardware`` is one PIM device with the processor attached to it (its ``host``).
``System`` is several identical devices joined by a ``Link``; a single device is a
system of one. Both are pure data, built only through :func:`sim.hwio.load_hardware`
and :func:`sim.system.load_system`, which validate a YAML mapping (a preset or a user
file) field by field. Derived figures (bandwidths, peaks, capacity, fingerprint) are
properties, never stored.
"""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import asdict, dataclass

__all__ = [
    "DEQUANT_SITES",
    "DTYPE_BYTES",
    "Bus",
    "Energy",
    "Formats",
    "Hardware",
    "INT_FORMATS",
    "Host",
    "Link",
    "NO_FORMATS",
    "Organisation",
    "PimUnit",
    "System",
    "TOPOLOGIES",
    "Timing",
    "as_system",
    "require_hardware",
]

DTYPE_BYTES = {"fp16": 2, "bf16": 2, "fp32": 4}
TOPOLOGIES = ("switch", "ring")
INT_FORMATS = {"int8": 8, "int4": 4}  # integer weight formats a unit may take: their bits
DEQUANT_SITES = ("bank",)  # where a unit dequantizes: in the bank, before its lanes


@dataclass(frozen=True)
class Organisation:
    """DRAM organisation of one device (all channels alike)."""

    channels: int
    banks_per_channel: int
    bank_groups: int
    rows_per_bank: int
    row_bytes: int
    column_bytes: int
    burst_length: int
    tck_ns: float


@dataclass(frozen=True)
class Timing:
    """DRAM timings in cycles of ``Organisation.tck_ns``."""

    trcd: int  # activate to read
    trcd_wr: int  # activate to write
    trcd_mac: int  # activate to PIM column op (MAC / element-wise)
    trp: int
    tras: int
    cl: int  # read latency: column command to first data
    cwl: int  # write latency
    tccd_s: int  # column to column, different bank group
    tccd_l: int  # column to column, same bank group
    trrd_s: int  # activate to activate, different bank group
    trrd_l: int  # activate to activate, same bank group
    tfaw: int  # four-activate window
    twr: int  # write recovery: end of write data to precharge
    trtp: int  # read to precharge
    trfc: int  # refresh cycle time (all banks)
    trefi: int  # refresh interval


@dataclass(frozen=True)
class PimUnit:
    """The processing unit beside the banks and the channel's broadcast buffer."""

    banks_per_unit: int  # 1: a unit per bank; 2: one per bank pair
    lanes: int  # multipliers per unit = elements per column access
    clock_mhz: float
    mac_latency_cycles: int  # pipeline depth in unit cycles, column read to accumulator
    registers: int  # accumulator registers per unit
    register_lanes: int  # elements per accumulator register
    adder_tree: bool  # MAC may reduce its lanes to one scalar ("dot" mode)
    dtype: str  # operand type in banks and global buffer
    accum_dtype: str  # accumulator type
    global_buffer_bytes: int  # per channel, broadcast operand
    elementwise: bool  # in-bank element-wise ops and activation functions
    activation_functions: tuple[str, ...]


@dataclass(frozen=True)
class Bus:
    """External data bus of one channel."""

    width_bits: int
    data_rate_gbps: float  # per pin


@dataclass(frozen=True)
class Host:
    """The processor next to the memory, timed by its roofline."""

    peak_gflops: float
    bandwidth_gbps: float  # for host ops on data the host holds
    op_overhead_ns: float  # fixed cost of dispatching one host op
    dtype: str  # activations on the host

    def op_ns(self, flops: float, nbytes: float) -> float:
        """Time of one host op: dispatch plus its roofline,
        ``op_overhead_ns + max(flops / peak_gflops, bytes / bandwidth_gbps)``."""
        return self.op_overhead_ns + max(flops / self.peak_gflops, nbytes / self.bandwidth_gbps)


@dataclass(frozen=True)
class Energy:
    """Energy per event, in picojoules, and static power."""

    activate_pj: float  # one row activation + precharge in one bank
    column_pj: float  # one column access inside a bank (read or write)
    mac_pj: float  # one lane multiply-accumulate
    gb_write_pj_per_byte: float
    offchip_pj_per_bit: float
    refresh_pj: float  # one all-bank refresh of a channel
    host_pj_per_flop: float
    host_pj_per_byte: float
    static_mw: float  # whole device


@dataclass(frozen=True)
class Formats:
    """The integer weight formats the units take besides their float ``pim.dtype``.

    ``weights``: ``int8`` (int8 weights times ``pim.dtype`` activations: a column access
    carries twice the elements) and/or ``int4`` (four times); ``int8_lanes`` /
    ``int4_lanes``: weights one unit multiplies per unit cycle in that format (a unit
    with fewer lanes than a column's weights takes several cycles per column: the format
    then saves capacity, not time). ``dequant``: ``bank``, an in-bank dequantizer turns
    each code into ``(q - z) * s`` of ``pim.dtype`` before the lanes (group scales and
    zero points latched with the row; raw integer sums scaled after the reduction are not
    modelled). ``group_sizes``: the
    groups whose scales the dequantizer holds. Energies per weight (lane op /
    dequantization) and the added area per unit, in mm^2, are the co-design figures.
    The default (no section in the file) takes no integer format: fp16/bf16 only.
    """

    weights: tuple[str, ...] = ()
    int8_lanes: int = 0
    int4_lanes: int = 0
    dequant: str = "bank"
    group_sizes: tuple[int, ...] = ()
    int8_mac_pj: float = 0.0
    int4_mac_pj: float = 0.0
    dequant_pj: float = 0.0
    unit_area_mm2: float = 0.0  # the float datapath of one unit
    added_area_mm2: float = 0.0  # integer lanes and dequantizer added to one unit

    def lanes(self, kind: str) -> int:
        return {"int8": self.int8_lanes, "int4": self.int4_lanes}.get(kind, 0)

    def mac_pj(self, kind: str) -> float:
        return {"int8": self.int8_mac_pj, "int4": self.int4_mac_pj}.get(kind, 0.0)


NO_FORMATS = Formats()


@dataclass(frozen=True)
class Hardware:
    """One PIM device. Hashable, comparable, JSON round-trippable via ``to_dict``."""

    name: str
    description: str
    org: Organisation
    timing: Timing
    pim: PimUnit
    bus: Bus
    host: Host
    energy: Energy
    formats: Formats = NO_FORMATS

    # ---- weight formats ----------------------------------------------------------
    def takes(self, kind: str) -> bool:
        """Whether the units multiply weights of ``kind`` (``int8``/``int4``) in the banks."""
        return kind in self.formats.weights

    def density(self, kind: str) -> int:
        """Weights of ``kind`` in the space of one ``pim.dtype`` element (1 for floats)."""
        bits = INT_FORMATS.get(kind)
        return 1 if bits is None else self.elem_bytes * 8 // bits

    def format_column_ns(self, kind: str) -> float:
        """Shortest time between two all-bank column MACs over weights of ``kind``: the
        column spacing, or the unit's cycles for the column's weights at its lanes."""
        d = self.density(kind)
        if d == 1:
            return self.pim_column_ns
        unit_ns = self.column_elems * d / self.formats.lanes(kind) * 1e3 / self.pim.clock_mhz
        return max(self.timing.tccd_l * self.org.tck_ns, unit_ns)

    # ---- derived figures -------------------------------------------------------
    @property
    def elem_bytes(self) -> int:
        return DTYPE_BYTES[self.pim.dtype]

    @property
    def column_elems(self) -> int:
        return self.org.column_bytes // self.elem_bytes

    @property
    def row_elems(self) -> int:
        return self.org.row_bytes // self.elem_bytes

    @property
    def columns_per_row(self) -> int:
        return self.org.row_bytes // self.org.column_bytes

    @property
    def units_per_channel(self) -> int:
        return self.org.banks_per_channel // self.pim.banks_per_unit

    @property
    def banks_per_group(self) -> int:
        return self.org.banks_per_channel // self.org.bank_groups

    def bank_targets(self, bank: int, step: int) -> range:
        """The banks an instruction addresses: ``bank`` alone (``step == 0``) or
        ``bank, bank + step, ...`` below ``banks_per_channel``."""
        n = self.org.banks_per_channel
        return range(bank, bank + 1) if step == 0 else range(bank, n, step)

    @property
    def gb_elems(self) -> int:
        return self.pim.global_buffer_bytes // self.elem_bytes

    @property
    def channel_bus_gbps(self) -> float:
        """One channel's external bandwidth in GB/s."""
        return self.bus.width_bits * self.bus.data_rate_gbps / 8

    @property
    def external_bandwidth_gbps(self) -> float:
        return self.channel_bus_gbps * self.org.channels

    @property
    def pim_column_ns(self) -> float:
        """Shortest time between two all-bank PIM column ops on a channel."""
        unit_ns = self.column_elems / self.pim.lanes * 1e3 / self.pim.clock_mhz
        return max(self.timing.tccd_l * self.org.tck_ns, unit_ns)

    @property
    def internal_bandwidth_gbps(self) -> float:
        """Column bandwidth of all banks that PIM units can consume at once."""
        per_channel = self.units_per_channel * self.org.column_bytes / self.pim_column_ns
        return per_channel * self.org.channels

    @property
    def pim_peak_gflops(self) -> float:
        units = self.units_per_channel * self.org.channels
        return units * self.pim.lanes * 2 * self.pim.clock_mhz / 1e3

    @property
    def host_peak_gflops(self) -> float:
        return self.host.peak_gflops

    @property
    def capacity_bytes(self) -> int:
        o = self.org
        return o.channels * o.banks_per_channel * o.rows_per_bank * o.row_bytes

    def to_dict(self) -> dict:
        """Every field, nested as in the YAML files."""
        d = asdict(self)
        d["pim"]["activation_functions"] = list(self.pim.activation_functions)
        if self.formats == NO_FORMATS:  # a float-only device: as before formats existed
            del d["formats"]
        else:
            d["formats"]["weights"] = list(self.formats.weights)
            d["formats"]["group_sizes"] = list(self.formats.group_sizes)
        return d

    @functools.cached_property
    def fingerprint(self) -> str:
        """Stable hash of the normalised fields except name and description (computed once
        per object: every field is frozen)."""
        d = self.to_dict()
        d.pop("name")
        d.pop("description")
        return _digest(d)

    def derived(self) -> dict[str, float | int | str]:
        """The figures users need at a glance."""
        return {
            "external_bandwidth_gbps": self.external_bandwidth_gbps,
            "internal_bandwidth_gbps": self.internal_bandwidth_gbps,
            "pim_peak_gflops": self.pim_peak_gflops,
            "host_peak_gflops": self.host_peak_gflops,
            "capacity_bytes": self.capacity_bytes,
            "fingerprint": self.fingerprint,
        }



def _digest(d: dict) -> str:
    blob = json.dumps(d, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Link:
    """The link joining the devices of a system.

    ``bandwidth_gbps`` is each device port's rate in one direction (ports are full
    duplex); ``latency_ns`` the fixed start-up of one transfer (per hop on a ring);
    ``topology`` is ``switch`` (every device has one port on a switch: any pair is one
    hop) or ``ring`` (each device has a port to each of its two neighbours).
    """

    bandwidth_gbps: float
    latency_ns: float
    topology: str

    def hops(self, src: int, dst: int, n: int) -> int:
        """Links a transfer from device position ``src`` to ``dst`` crosses, of ``n``."""
        if src == dst:
            return 0
        if self.topology == "switch":
            return 1
        d = (dst - src) % n
        return min(d, n - d)

    def transfer_ns(self, nbytes: float, hops: int = 1) -> float:
        """Start-up plus serialisation of one transfer over ``hops`` links (cut-through:
        the start-up is paid per hop, the bytes once)."""
        return hops * self.latency_ns + nbytes / self.bandwidth_gbps if hops else 0.0


@dataclass(frozen=True)
class System:
    """``devices`` identical PIM devices (each with its own attached processor) joined by
    ``link``; ``link`` is None for a single device."""

    name: str
    description: str
    device: Hardware
    devices: int
    link: Link | None

    @property
    def capacity_bytes(self) -> int:
        return self.devices * self.device.capacity_bytes

    def to_dict(self) -> dict:
        return {"name": self.name, "description": self.description,
                "device": self.device.to_dict(), "devices": self.devices,
                "link": asdict(self.link) if self.link else None}

    @functools.cached_property
    def fingerprint(self) -> str:
        """The device's fingerprint for a single device (so its measurements are shared);
        otherwise a hash of the device fingerprint, the count and the link."""
        if self.devices == 1:
            return self.device.fingerprint
        return _digest({"device": self.device.fingerprint, "devices": self.devices,
                        "link": asdict(self.link) if self.link else None})


def require_hardware(hw: object, who: str) -> Hardware:
    """``hw`` itself when it is a :class:`Hardware`; anything else is refused, naming
    ``who`` (names and files are resolved once, by ``sim.hwio.load_hardware``)."""
    if not isinstance(hw, Hardware):
        from .errors import HardwareError

        raise HardwareError(f"{who} takes a Hardware, got {type(hw).__name__} {hw!r:.60}: "
                            "resolve a preset or file with sim.hwio.load_hardware first")
    return hw


def as_system(hw: object, who: str) -> System:
    """``hw`` as a :class:`System`: a System, or a Hardware as the system of one device."""
    if isinstance(hw, System):
        return hw
    d = require_hardware(hw, who)
    return System(d.name, d.description, d, 1, None)
