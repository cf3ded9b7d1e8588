"""System files: several identical devices and the link between them.

A system file is a mapping with ``name``, ``description``, ``device`` (a preset name, a
device YAML path relative to the file, or an inline device mapping), ``devices`` (how
many) and, for more than one device, ``link`` (``bandwidth_gbps`` per direction,
``latency_ns``, ``topology``). Any device file is also a system of one device, so
``load_system`` accepts everything :func:`sim.hwio.load_hardware` does.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import NoReturn

from .errors import HardwareError
from .files import confined, shown
from .hardware import TOPOLOGIES, Hardware, Link, System

__all__ = ["SYSTEM_KEYS", "SYSTEM_LIMITS", "is_system_mapping", "load_system", "system_from_dict"]

SYSTEM_KEYS = ("name", "description", "device", "devices", "link")
# Generous upper bounds (as sim.hwio.LIMITS): far beyond any system built, low enough that
# a typo is refused before a simulator allocates a memory per device.
SYSTEM_LIMITS = {"devices": 4096, "link.bandwidth_gbps": 1e6, "link.latency_ns": 1e9}
SYSTEM_FLOORS = {"link.bandwidth_gbps": 0.01}  # a link slower than 10 MB/s is no link
_LINK_KEYS = ("bandwidth_gbps", "latency_ns", "topology")


def is_system_mapping(data: object) -> bool:
    """A mapping that describes a system (it has a ``devices`` count)."""
    return isinstance(data, Mapping) and "devices" in data


def _fail(source: str, field: str, rule: str) -> NoReturn:
    raise HardwareError(f"{source}: field {shown(field)} {rule}")


def _number(source: str, field: str, v: object, *, zero: bool = False) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        _fail(source, field, f"must be a finite number, got {shown(v)}")
    lo, hi = SYSTEM_FLOORS.get(field, 0), SYSTEM_LIMITS[field]
    if v > hi:
        _fail(source, field, f"must be at most {hi:g} (allowed: {lo:g} to {hi:g}), got "
                             f"{shown(v, 24)}")
    if v < lo or (v == 0 and not zero):
        _fail(source, field, f"must be {'>= ' + format(lo, 'g') if lo or zero else '> 0'} "
                             f"(allowed: {lo:g} to {hi:g}), got {shown(v, 24)}")
    return float(v)


def _link(source: str, data: object) -> Link:
    if not isinstance(data, Mapping):
        _fail(source, "link", "must be a mapping of fields")
    for extra in sorted(set(data) - set(_LINK_KEYS), key=str):
        _fail(source, f"link.{extra}", f"is unknown (known: {', '.join(_LINK_KEYS)})")
    for k in _LINK_KEYS:
        if k not in data:
            _fail(source, f"link.{k}", "is missing")
    if data["topology"] not in TOPOLOGIES:
        _fail(source, "link.topology", f"must be one of {', '.join(TOPOLOGIES)}, "
                                       f"got {shown(data['topology'])}")
    return Link(_number(source, "link.bandwidth_gbps", data["bandwidth_gbps"]),
                _number(source, "link.latency_ns", data["latency_ns"], zero=True),
                data["topology"])


def _device(source: str, ref: object, base: Path | None) -> Hardware:
    """The one device ``ref`` names: an inline mapping, a preset, or a YAML file inside the
    system file's folder ``base``. A reference is followed once and must name a device,
    never a system, so references cannot form a cycle."""
    from .hwio import PRESET_DIR, VARIANT_DIR, hardware_from_dict, read_hardware_file

    if isinstance(ref, Mapping):
        if is_system_mapping(ref):
            _fail(source, "device", "must be one device, not a system")
        return hardware_from_dict(ref, source=f"{source}: field 'device'")
    if not isinstance(ref, str) or not ref:
        _fail(source, "device", f"must be a preset name, a file or a mapping, got {shown(ref)}")
    preset = not Path(ref).suffix and "/" not in ref and any(
        (d / f"{ref}.yaml").exists() for d in (PRESET_DIR, VARIANT_DIR))
    target = ref if preset or base is None else str(confined(
        base, ref, what="device file", error=HardwareError))
    try:
        path, data = read_hardware_file(target)
    except HardwareError as e:
        raise HardwareError(f"{source}: field 'device': {e}") from None
    if Path(source).exists() and path.exists() and Path(source).samefile(path):
        _fail(source, "device", f"names the system file itself ({shown(ref)}); name a device "
                                "file or preset")
    if is_system_mapping(data):
        _fail(source, "device", f"{shown(ref)} is a system, not one device (a system is "
                                "made of a device file or preset)")
    return hardware_from_dict(data, source=str(path))


def system_from_dict(data: object, *, source: str, base: Path | None = None) -> System:
    """Validate a system mapping and build the System (``base``: the file's folder)."""
    if not isinstance(data, Mapping):
        raise HardwareError(f"{source}: a system file must be a mapping")
    for extra in sorted(set(data) - set(SYSTEM_KEYS), key=str):
        _fail(source, str(extra), f"is unknown (known: {', '.join(SYSTEM_KEYS)})")
    for k in ("name", "device", "devices"):
        if k not in data:
            _fail(source, k, "is missing")
    name, desc, n = data["name"], data.get("description", ""), data["devices"]
    if not isinstance(name, str) or not name:
        _fail(source, "name", f"must be a non-empty string, got {shown(name)}")
    if not isinstance(desc, str):
        _fail(source, "description", f"must be a string, got {shown(desc)}")
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        _fail(source, "devices", f"must be a positive integer, got {shown(n)}")
    if n > SYSTEM_LIMITS["devices"]:
        _fail(source, "devices", f"must be at most {SYSTEM_LIMITS['devices']}, got "
                                 f"{shown(n, 24)}")
    link = data.get("link")
    if n > 1 and link is None:
        _fail(source, "link", f"is missing: {n} devices need a link between them")
    device = _device(source, data["device"], base)
    return System(name, desc, device, n, _link(source, link) if link is not None else None)


def load_system(hw: str | Path | Mapping | Hardware | System) -> System:
    """A preset or file name, a mapping, a Hardware (a system of one) or a System."""
    from .hwio import load_hardware, read_hardware_file

    if isinstance(hw, System):
        return hw
    if isinstance(hw, Hardware):
        return System(hw.name, hw.description, hw, 1, None)
    if isinstance(hw, Mapping):
        if is_system_mapping(hw):
            return system_from_dict(hw, source="<mapping>")
        return load_system(load_hardware(hw))
    path, data = read_hardware_file(hw)
    if is_system_mapping(data):
        return system_from_dict(data, source=str(path), base=path.parent)
    return load_system(load_hardware(path))
