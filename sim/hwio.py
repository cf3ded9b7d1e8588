"""Hardware files: validate a YAML mapping, then build the frozen :class:`Hardware`.

``load_hardware`` accepts a preset name, a path to a YAML file, a mapping, or a
``Hardware`` instance, and is the one place such arguments become objects. Every rule
broken is reported with the file, the field (``section.field``) and the rule. Numbers
must be finite and within what a real device could be (:data:`LIMITS`: generous upper
bounds, so a typo such as ``channels: 1000000000000`` is refused before any simulator
sizes memory for it; :data:`FLOORS`: lower bounds, so ``tck_ns: 1e-300`` or
``rows_per_bank: 1`` is refused before a simulator divides by it). Files are read through
:mod:`sim.files` (regular files of at most :data:`MAX_FILE_BYTES`, no YAML aliases, nesting
bounded).
"""

from __future__ import annotations

import dataclasses
import math
import typing
from collections.abc import Mapping
from pathlib import Path

from .errors import HardwareError
from .files import load_yaml, shown
from .hardware import (
    DEQUANT_SITES,
    DTYPE_BYTES,
    INT_FORMATS,
    Bus,
    Energy,
    Formats,
    Hardware,
    Host,
    Organisation,
    PimUnit,
    Timing,
)

__all__ = ["FLOORS", "LIMITS", "MAX_FILE_BYTES", "PRESET_DIR", "VARIANT_DIR",
           "hardware_from_dict", "list_presets", "list_variants", "load_hardware",
           "preset_hardware", "read_hardware_file"]

PRESET_DIR = Path(__file__).parent / "presets"
# Variants of the presets (integer-format units): loadable by name like a preset, listed by
# list_variants, and left out of list_presets (the suites and sweeps over every preset).
VARIANT_DIR = PRESET_DIR / "variants"
_SECTIONS: dict[str, type] = {
    "org": Organisation,
    "timing": Timing,
    "pim": PimUnit,
    "bus": Bus,
    "host": Host,
    "energy": Energy,
}
# Optional sections: absent, the device takes their defaults (``formats``: float only).
_OPTIONAL: dict[str, type] = {"formats": Formats}
# Fields that may be zero (every other number must be positive).
_MAY_BE_ZERO = {"energy", "host.op_overhead_ns", "pim.mac_latency_cycles", "timing.trtp",
                "formats"}
MAX_FILE_BYTES = 1_000_000  # a hardware description is a few kB
# Upper bounds by field or section: far above any device built or announced, low enough
# that every derived size (banks, rows, buffers) stays allocatable.
LIMITS: dict[str, float] = {
    "org.channels": 1024, "org.banks_per_channel": 256, "org.bank_groups": 64,
    "org.rows_per_bank": 1 << 22, "org.row_bytes": 1 << 16, "org.column_bytes": 4096,
    "org.burst_length": 64, "org.tck_ns": 100.0, "timing": 10_000_000,
    "pim.banks_per_unit": 256, "pim.lanes": 4096, "pim.clock_mhz": 100_000.0,
    "pim.mac_latency_cycles": 10_000, "pim.registers": 1 << 16,
    "pim.register_lanes": 4096, "pim.global_buffer_bytes": 1 << 24,
    "bus.width_bits": 4096, "bus.data_rate_gbps": 1000.0, "host.peak_gflops": 1e9,
    "host.bandwidth_gbps": 1e8, "host.op_overhead_ns": 1e9, "energy": 1e12,
    "formats.int8_lanes": 4096, "formats.int4_lanes": 4096, "formats.group_sizes": 1 << 16,
    "formats": 1e12,
}
# Lower bounds where "> 0" is not enough: no device built or announced is smaller or
# faster (scaled-down devices of a few dozen rows per bank, used to study capacity, pass).
FLOORS: dict[str, float] = {
    "org.banks_per_channel": 2, "org.rows_per_bank": 16, "org.row_bytes": 64,
    "org.column_bytes": 4, "org.burst_length": 2, "org.tck_ns": 0.1, "pim.clock_mhz": 10.0,
    "bus.data_rate_gbps": 0.1, "host.peak_gflops": 0.1, "host.bandwidth_gbps": 0.1,
}
MAX_CAPACITY_BYTES = 1 << 50  # 1 PiB in one device


def list_presets() -> list[str]:
    """Names of the shipped presets."""
    return sorted(p.stem for p in PRESET_DIR.glob("*.yaml"))


def list_variants() -> list[str]:
    """Names of the shipped preset variants (``sim/presets/variants``)."""
    return sorted(p.stem for p in VARIANT_DIR.glob("*.yaml"))


def preset_hardware() -> list[Hardware]:
    """The hardware of every shipped preset (a system preset's: its device), by name."""
    return [load_hardware(name) for name in list_presets()]


def list_device_presets() -> list[str]:
    """Names of the shipped presets that describe one device (not a system of several)."""
    return [name for name in list_presets()
            if not _is_system(read_hardware_file(name)[1])]


def load_hardware(hw: str | Path | Mapping | Hardware) -> Hardware:
    """Turn a preset name, a YAML path, a mapping or a Hardware into a Hardware.

    A system file (several devices, :mod:`sim.system`) gives its device, named and
    described as the system (the fingerprint is the device's).
    """
    if isinstance(hw, Hardware):
        return hw
    if isinstance(hw, Mapping):
        if _is_system(hw):
            return _system_device(hw, "<mapping>", None)
        return hardware_from_dict(hw, source="<mapping>")
    path, data = read_hardware_file(hw)
    if _is_system(data):
        return _system_device(data, str(path), path.parent)
    return hardware_from_dict(data, source=str(path))


def read_hardware_file(hw: str | Path) -> tuple[Path, object]:
    """The path of a preset name or YAML file and its parsed content (read by
    :func:`sim.files.load_yaml`: a regular file of at most :data:`MAX_FILE_BYTES`, UTF-8,
    no aliases, nesting bounded; anything else is refused with one line)."""
    text = str(hw)
    path = Path(text)
    if not path.suffix and "/" not in text and (PRESET_DIR / f"{text}.yaml").exists():
        path = PRESET_DIR / f"{text}.yaml"
    elif not path.suffix and "/" not in text and (VARIANT_DIR / f"{text}.yaml").exists():
        path = VARIANT_DIR / f"{text}.yaml"
    if not path.exists():
        raise HardwareError(
            f"unknown hardware {shown(text)}: not a preset ({', '.join(list_presets())}) "
            "nor an existing YAML file"
        )
    return path, load_yaml(path, limit=MAX_FILE_BYTES, what="hardware file",
                           error=HardwareError)


def _is_system(data: object) -> bool:
    from .system import is_system_mapping

    return is_system_mapping(data)


def _system_device(data: Mapping, source: str, base: Path | None) -> Hardware:
    from .system import system_from_dict

    sysm = system_from_dict(data, source=source, base=base)
    return dataclasses.replace(sysm.device, name=sysm.name, description=sysm.description)


def _fail(source: str, field: str, rule: str) -> typing.NoReturn:
    raise HardwareError(f"{source}: field {shown(field)} {rule}")


def _coerce(source: str, name: str, value: object, tp: object) -> object:
    """Check one leaf value against its annotated type."""
    if tp is bool:
        if not isinstance(value, bool):
            _fail(source, name, f"must be true or false, got {shown(value)}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            _fail(source, name, f"must be an integer, got {shown(value)}")
    elif tp is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            _fail(source, name, f"must be a number, got {shown(value)}")
        value = float(value)
    elif tp == tuple[int, ...]:
        if not isinstance(value, list | tuple) or not all(
                isinstance(v, int) and not isinstance(v, bool) for v in value):
            _fail(source, name, f"must be a list of integers, got {shown(value)}")
        for v in value:
            _bounded(source, name, v)
        return tuple(value)
    elif tp is str:
        if not isinstance(value, str) or not value:
            _fail(source, name, f"must be a non-empty string, got {shown(value)}")
        return value
    else:  # tuple[str, ...]
        if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
            _fail(source, name, f"must be a list of strings, got {shown(value)}")
        return tuple(value)
    if isinstance(value, float) and not math.isfinite(value):
        _fail(source, name, f"must be a finite number, got {value!r}")
    _bounded(source, name, value)
    return value


def _text(x: float) -> str:
    return f"{int(x):,}" if float(x).is_integer() else f"{x:g}"


def _bounded(source: str, name: str, value: float) -> None:
    """``value`` within the field's range: >= 0 or > 0, >= its floor, <= its limit."""
    section = name.split(".")[0]
    zero = name in _MAY_BE_ZERO or section in _MAY_BE_ZERO
    lo, hi = FLOORS.get(name), LIMITS.get(name, LIMITS.get(section))
    low = _text(lo) if lo is not None else "0" if zero else "1" if isinstance(value, int) \
        else "above 0"
    allowed = f"(allowed: {low} to {_text(hi)}" if hi is not None else f"(allowed: {low}"
    got = repr(value) if len(repr(value)) <= 24 else f"a {len(str(int(value)))}-digit number"
    if zero and value < 0:
        _fail(source, name, f"must be >= 0 {allowed}), got {got}")
    if not zero and value <= 0:
        _fail(source, name, f"must be > 0 {allowed}), got {got}")
    if lo is not None and value < lo:
        _fail(source, name, f"must be >= {_text(lo)} {allowed}; no real device is smaller "
                            f"or faster), got {got}")
    if hi is not None and value > hi:
        _fail(source, name, f"must be <= {_text(hi)} {allowed}; no real device is larger), "
                            f"got {got}")


def _section(source: str, key: str, cls: type, data: object) -> object:
    if not isinstance(data, Mapping):
        _fail(source, key, "must be a mapping of fields")
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    for extra in sorted(set(data) - set(names), key=str):
        _fail(source, f"{key}.{extra}", f"is unknown (known: {', '.join(names)})")
    values = {}
    for n in names:
        if n not in data:
            _fail(source, f"{key}.{n}", "is missing")
        values[n] = _coerce(source, f"{key}.{n}", data[n], hints[n])
    return cls(**values)


def hardware_from_dict(data: object, *, source: str) -> Hardware:
    """Validate ``data`` (as loaded from YAML) and build the Hardware."""
    if not isinstance(data, Mapping):
        raise HardwareError(f"{source}: a hardware file must be a mapping of sections")
    allowed = {"name", "description", *_SECTIONS, *_OPTIONAL}
    for extra in sorted(set(data) - allowed, key=str):
        _fail(source, str(extra), f"is unknown (known: {', '.join(sorted(allowed))})")
    for key in ("name", *_SECTIONS):
        if key not in data:
            _fail(source, key, "is missing")
    parts = {k: _section(source, k, cls, data[k]) for k, cls in _SECTIONS.items()}
    parts |= {k: _section(source, k, cls, data[k]) for k, cls in _OPTIONAL.items() if k in data}
    name = _coerce(source, "name", data["name"], str)
    desc = data.get("description", "")
    if not isinstance(desc, str):
        _fail(source, "description", f"must be a string, got {shown(desc)}")
    hw = Hardware(name=name, description=desc, **parts)
    _check_rules(source, hw)
    return hw


def _check_rules(source: str, hw: Hardware) -> None:
    """Cross-field rules: the device must be physically consistent."""
    o, t, p = hw.org, hw.timing, hw.pim
    if hw.capacity_bytes > MAX_CAPACITY_BYTES:
        _fail(source, "org", f"describes {hw.capacity_bytes:,} bytes; a device holds at most "
                             f"{MAX_CAPACITY_BYTES:,}")
    if o.banks_per_channel % o.bank_groups:
        _fail(source, "org.bank_groups",
              f"must divide org.banks_per_channel ({o.banks_per_channel})")
    if o.row_bytes % o.column_bytes:
        _fail(source, "org.row_bytes", f"must be a multiple of org.column_bytes ({o.column_bytes})")
    if o.banks_per_channel % p.banks_per_unit:
        _fail(source, "pim.banks_per_unit", "must divide org.banks_per_channel")
    for key in ("dtype", "accum_dtype"):
        if getattr(p, key) not in DTYPE_BYTES:
            _fail(source, f"pim.{key}", f"must be one of {sorted(DTYPE_BYTES)}")
    if hw.host.dtype not in DTYPE_BYTES:
        _fail(source, "host.dtype", f"must be one of {sorted(DTYPE_BYTES)}")
    if p.dtype == "fp32":
        _fail(source, "pim.dtype", "must be a 16-bit type (fp16 or bf16)")
    if o.column_bytes % DTYPE_BYTES[p.dtype] or o.column_bytes // DTYPE_BYTES[p.dtype] != p.lanes:
        _fail(source, "pim.lanes", "must equal the elements in one column access")
    if p.register_lanes % p.lanes and p.lanes % p.register_lanes:
        _fail(source, "pim.register_lanes", "must be a multiple or divisor of pim.lanes")
    if p.global_buffer_bytes % o.column_bytes:
        _fail(source, "pim.global_buffer_bytes", "must be a multiple of org.column_bytes")
    if t.tras < t.trcd:
        _fail(source, "timing.tras", "must be >= timing.trcd")
    if t.tccd_l < t.tccd_s or t.trrd_l < t.trrd_s:
        _fail(source, "timing.tccd_l", "long (same group) timings must be >= short ones")
    if t.trefi <= t.trfc:
        _fail(source, "timing.trefi", "must exceed timing.trfc")
    _check_formats(source, hw)
    known = {"relu", "gelu", "silu", "sigmoid", "tanh", "exp"}
    for f in p.activation_functions:
        if f not in known:
            _fail(source, "pim.activation_functions",
                  f"has unknown function {shown(f)} (known: {sorted(known)})")


def _check_formats(source: str, hw: Hardware) -> None:
    """The integer formats a unit takes: known, with lanes that fill or divide a column,
    int4 only behind an in-bank dequantizer, groups powers of two."""
    f = hw.formats
    for kind in f.weights:
        if kind not in INT_FORMATS:
            _fail(source, "formats.weights", f"has unknown format {shown(kind)} (known: "
                                             f"{', '.join(INT_FORMATS)})")
        lanes, per_col = f.lanes(kind), hw.column_elems * hw.density(kind)
        if lanes <= 0:
            _fail(source, f"formats.{kind}_lanes", f"must be > 0 when {kind} is taken")
        if lanes % hw.pim.lanes or (per_col % lanes and lanes % per_col):
            _fail(source, f"formats.{kind}_lanes", f"must be a multiple of pim.lanes "
                  f"({hw.pim.lanes}) and divide or fill a column's {per_col} {kind} weights")
    if f.weights and not hw.pim.adder_tree:
        _fail(source, "formats.weights", "needs pim.adder_tree: integer weights are MACed in "
                                         "dot mode, their lanes feeding the adder tree")
    if len(set(f.weights)) != len(f.weights):
        _fail(source, "formats.weights", "lists a format twice")
    if f.dequant not in DEQUANT_SITES:
        _fail(source, "formats.dequant", f"must be one of {', '.join(DEQUANT_SITES)}")
    if "int4" in f.weights and f.dequant != "bank":
        _fail(source, "formats.dequant", "must be bank when int4 is taken (int4 weights need "
                                         "their group scales applied before the sum)")
    for g in f.group_sizes:
        if g < 16 or g & (g - 1):
            _fail(source, "formats.group_sizes", f"has {g}: groups are powers of two >= 16")
    if f.weights and not f.group_sizes:
        _fail(source, "formats.group_sizes", "must list the groups an in-bank dequantizer "
                                             "holds scales for")
