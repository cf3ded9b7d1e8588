"""Programs for a system of several devices: device groups, each running one program.

A :class:`Group` is a set of devices that run the same :class:`~sim.program.Program`
(SPMD over devices, as a PIM stream is SPMD over channels: ``dev`` in a link stream's
Affine is the device's position in the group). Each device has its own bank contents
and its own copy of every host buffer; devices exchange data only through ``Send`` in
link streams. Tokens are global: a token is produced by one stream of one group, and a
wait on it is released once every device of that group has signalled it (a barrier).
A single-device program is a system program of one group of device 0.
"""

from __future__ import annotations

import json
import weakref
from dataclasses import dataclass

from .errors import ProgramError
from .hardware import System
from .program import Program
from .validate import check_program, token_rules

__all__ = ["Group", "SystemProgram", "validate_system"]


@dataclass(frozen=True)
class Group:
    """Devices (positions in the system) that run ``program``."""

    devices: tuple[int, ...]
    program: Program

    def __post_init__(self) -> None:
        object.__setattr__(self, "devices", tuple(int(d) for d in self.devices))


@dataclass(frozen=True)
class SystemProgram:
    """The whole system's program: disjoint device groups and their programs."""

    groups: tuple[Group, ...]
    name: str = "system"

    def __post_init__(self) -> None:
        object.__setattr__(self, "groups", tuple(self.groups))

    @classmethod
    def single(cls, program: Program) -> SystemProgram:
        """``program`` on device 0 alone."""
        return cls((Group((0,), program),), program.name)

    def to_dict(self) -> dict:
        return {"name": self.name, "groups": [{"devices": list(g.devices),
                                               "program": g.program.to_dict()}
                                              for g in self.groups]}

    def to_json(self, indent: int | None = None) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    @classmethod
    def from_dict(cls, d: dict) -> SystemProgram:
        try:
            groups = tuple(Group(tuple(g["devices"]), Program.from_dict(g["program"]))
                           for g in d["groups"])
            return cls(groups, d.get("name", "system"))
        except (KeyError, TypeError, ValueError) as e:
            raise ProgramError(f"malformed system program JSON: {type(e).__name__}: {e}") from None

    @classmethod
    def from_json(cls, text: str) -> SystemProgram:
        try:
            return cls.from_dict(json.loads(text))
        except json.JSONDecodeError as e:
            raise ProgramError(f"system program is not valid JSON: {e}") from None

    def to_asm(self) -> str:
        out = []
        for i, g in enumerate(self.groups):
            devs = ",".join(str(d) for d in g.devices)
            out.append(f"; group {i} on devices {devs}\n" + g.program.to_asm())
        return "\n".join(out)


# System programs already found valid, by (id, system fingerprint): they are immutable.
_VALID: weakref.WeakValueDictionary[tuple[int, str], SystemProgram] = \
    weakref.WeakValueDictionary()


def validate_system(sp: SystemProgram, system: System) -> None:
    """Raise ProgramError naming group, stream, instruction path and rule if ``sp`` is
    invalid on ``system``: groups of distinct devices in range, every program valid on
    the device, sends within the groups' buffers, one producer per token."""
    key = (id(sp), system.fingerprint)
    if _VALID.get(key) is sp:
        return
    _check_system(sp, system)
    _VALID[key] = sp


def _check_system(sp: SystemProgram, system: System) -> None:
    seen: dict[int, int] = {}
    for i, g in enumerate(sp.groups):
        if not g.devices:
            raise ProgramError(f"group {i} has no device")
        for d in g.devices:
            if not 0 <= d < system.devices:
                raise ProgramError(f"group {i}: device {d} outside [0, {system.devices})")
            if d in seen:
                raise ProgramError(f"group {i}: device {d} already runs group {seen[d]}")
            seen[d] = i
    sizes = [{b.name: b.size for b in g.program.buffers} for g in sp.groups]
    signals: dict[str, set[str]] = {}
    waits: list[tuple[str, str]] = []
    for i, g in enumerate(sp.groups):
        prefix = f"g{i}." if len(sp.groups) > 1 else ""
        check_program(g.program, system.device, signals, waits, devices=len(g.devices),
                      groups=sizes, prefix=prefix)
    token_rules(signals, waits)
