"""The instruction set: frozen, hashable dataclasses, one per command.

Addresses are :class:`Affine` expressions over enclosing loop variables and ``ch`` (the
channel's position in its stream's channel tuple), so one SPMD stream body serves every
channel of a group and loops stay compact. Bank targets are a start bank and a step:
``step == 0`` addresses one bank, otherwise ``range(bank, banks_per_channel, step)``.
``docs/isa.md`` is the reference; this module is the single source of the fields.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field, fields
from typing import ClassVar

__all__ = [
    "Act", "Af", "Affine", "BufRef", "ClrAcc", "Ew", "HostOp", "Instr", "Mac", "Pre",
    "RdAcc", "RdBank", "Send", "Signal", "Wait", "WrAcc", "WrBank", "WrGb", "aff", "PIM_OPS",
    "HOST_STREAM_OPS", "LINK_OPS", "MAC_MODES",
]

MAC_MODES = ("dot", "lane", "bcast")


@dataclass(frozen=True)
class Affine:
    """``base + sum(stride * var)``; ``terms`` is sorted ((var, stride), ...)."""

    base: int = 0
    terms: tuple[tuple[str, int], ...] = ()

    def eval(self, env: dict[str, int]) -> int:
        return self.base + sum(s * env[v] for v, s in self.terms)

    def vars(self) -> set[str]:
        return {v for v, _ in self.terms}

    def __str__(self) -> str:
        parts = [str(self.base)] if self.base or not self.terms else []
        parts += [f"{s}*{v}" if s != 1 else v for v, s in self.terms]
        return "+".join(parts)


def aff(base: int | Affine = 0, **strides: int) -> Affine:
    """Build an Affine: ``aff(4, i=32, ch=1024)``; an Affine passes through."""
    if isinstance(base, Affine):
        return base
    return Affine(int(base), tuple(sorted((v, int(s)) for v, s in strides.items() if s)))


def _a(x: int | Affine) -> Affine:
    return x if isinstance(x, Affine) else Affine(int(x))


@dataclass(frozen=True)
class BufRef:
    """A window of a host buffer: ``shape`` elements from element ``offset``, row-major."""

    buf: str
    offset: Affine = field(default_factory=Affine)
    shape: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        _normalise(self)
        object.__setattr__(self, "shape", tuple(int(d) for d in self.shape))

    @property
    def size(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n


@functools.cache
def _operand_fields(cls: type) -> tuple[tuple[str, bool], ...]:
    """(name, annotated Affine) of every field of dataclass ``cls``."""
    return tuple((f.name, f.type == "Affine") for f in fields(cls))


def _normalise(obj: object) -> None:
    """Turn int operands into Affine and lists into tuples on a frozen dataclass."""
    for name, affine in _operand_fields(type(obj)):
        v = getattr(obj, name)
        if affine and not isinstance(v, Affine):
            object.__setattr__(obj, name, Affine(int(v)))
        elif isinstance(v, list):
            object.__setattr__(obj, name, tuple(v))


class Instr:
    """Base of every instruction; ``op`` is the mnemonic used in JSON and assembly."""

    op: ClassVar[str]

    def __post_init__(self) -> None:
        _normalise(self)


# ---- bank commands (PIM streams) ------------------------------------------------
@dataclass(frozen=True)
class Act(Instr):
    """Activate ``row`` in the target banks (multi-bank counts as 4 for tFAW)."""

    op: ClassVar[str] = "act"
    bank: int
    step: int
    row: Affine


@dataclass(frozen=True)
class Pre(Instr):
    """Precharge the target banks."""

    op: ClassVar[str] = "pre"
    bank: int
    step: int


@dataclass(frozen=True)
class Mac(Instr):
    """``ncols`` column MACs of the open row against the global buffer.

    Column ``col + i`` meets global-buffer element ``gb + i * g`` with ``g = lanes``
    (modes dot, lane) or ``g = 1`` (bcast). Per unit, register ``reg``:
    dot: ``acc[reg][lane] += sum_l v[l] * gb[.. + l]`` (needs an adder tree);
    lane: ``acc[reg][l] += v[l] * gb[.. + l]``; bcast: ``acc[reg][l] += v[l] * gb[..]``.
    ``fmt`` ``int8``/``int4`` (dot mode, on units whose ``hw.formats`` take it): a column
    holds ``hw.density(fmt)`` times as many weights, each meeting its own global-buffer
    element (``g = lanes * density``); the values a column yields are the weights the
    unit's format path delivers (see ``sim.functional.memory``).
    """

    op: ClassVar[str] = "mac"
    bank: int
    step: int
    col: Affine
    ncols: int
    gb: Affine
    reg: Affine
    mode: str = "lane"
    lane: Affine = field(default_factory=Affine)
    fmt: str = ""  # weight format of the open row: "" (pim.dtype), "int8" or "int4"


@dataclass(frozen=True)
class Ew(Instr):
    """Element-wise with one open-row column: ``acc[reg] = acc[reg] (op) v`` (mov loads)."""

    op: ClassVar[str] = "ew"
    bank: int
    step: int
    fn: str  # mov | add | mul
    col: Affine
    reg: Affine


@dataclass(frozen=True)
class Af(Instr):
    """Activation function on a register of the target banks' units."""

    op: ClassVar[str] = "af"
    bank: int
    step: int
    fn: str
    reg: Affine


@dataclass(frozen=True)
class ClrAcc(Instr):
    """Zero registers ``reg .. reg+nregs-1`` of the target units."""

    op: ClassVar[str] = "clr"
    bank: int
    step: int
    reg: Affine
    nregs: int = 1


@dataclass(frozen=True)
class WrAcc(Instr):
    """Write register ``reg`` (rounded to the bank dtype) into column ``col`` of the open row."""

    op: ClassVar[str] = "wracc"
    bank: int
    step: int
    col: Affine
    reg: Affine


@dataclass(frozen=True)
class WrGb(Instr):
    """Broadcast ``src.size`` elements of a host buffer into the global buffer at ``gb``."""

    op: ClassVar[str] = "wrgb"
    src: BufRef
    gb: Affine


@dataclass(frozen=True)
class RdAcc(Instr):
    """Read registers ``reg .. reg+nregs-1`` of the target units to the host.

    ``dst`` receives, in order: unit (ascending bank), register, register lane; ``lanes``
    (0: all) reads only each register's first lanes (a partly filled register set).
    """

    op: ClassVar[str] = "rdacc"
    bank: int
    step: int
    reg: Affine
    nregs: int
    dst: BufRef
    lanes: int = 0


@dataclass(frozen=True)
class RdBank(Instr):
    """Read ``ncols`` columns of one bank's open row from ``col`` to the host. ``fmt``
    (``int8``/``int4``): the row holds packed weights of that format, which the host
    dequantizes as they arrive (``hw.density(fmt)`` values per column element slot)."""

    op: ClassVar[str] = "rd"
    bank: int
    col: Affine
    ncols: int
    dst: BufRef
    fmt: str = ""


@dataclass(frozen=True)
class WrBank(Instr):
    """Write ``ncols`` columns from the host into one bank's open row from ``col``."""

    op: ClassVar[str] = "wr"
    bank: int
    col: Affine
    ncols: int
    src: BufRef


# ---- synchronisation (any stream) -----------------------------------------------
@dataclass(frozen=True)
class Signal(Instr):
    """Mark ``token`` once everything issued before it in this stream has completed."""

    op: ClassVar[str] = "signal"
    token: str


@dataclass(frozen=True)
class Wait(Instr):
    """Block until the next signal of each token (each waiter has its own cursor)."""

    op: ClassVar[str] = "wait"
    tokens: tuple[str, ...]


# ---- host ------------------------------------------------------------------------
@dataclass(frozen=True)
class HostOp(Instr):
    """A host computation from ``sim.host_ops`` timed by the host roofline."""

    op: ClassVar[str] = "host"
    kind: str
    outs: tuple[BufRef, ...]
    ins: tuple[BufRef, ...]
    attrs: tuple[tuple[str, float | int | str], ...] = ()

    def attr(self, name: str, default: float | int | str | None = None):
        return dict(self.attrs).get(name, default)


# ---- link (device-to-device transfers) --------------------------------------------
@dataclass(frozen=True)
class Send(Instr):
    """Copy the window ``src`` of this device's buffer into the window ``dst`` of a buffer
    on another device: the device at position ``peer mod n`` of group ``group`` (``n``
    devices; ``-1`` is this stream's own group). ``dev`` in an Affine is this device's
    position in its group. A send to the device itself is a local copy."""

    op: ClassVar[str] = "send"
    src: BufRef
    dst: BufRef
    peer: Affine
    group: int = -1


PIM_OPS: dict[str, type[Instr]] = {
    c.op: c for c in (Act, Pre, Mac, Ew, Af, ClrAcc, WrAcc, WrGb, RdAcc, RdBank, WrBank)
}
HOST_STREAM_OPS: dict[str, type[Instr]] = {c.op: c for c in (HostOp,)}
LINK_OPS: dict[str, type[Instr]] = {c.op: c for c in (Send,)}
SYNC_OPS: dict[str, type[Instr]] = {c.op: c for c in (Signal, Wait)}
ALL_OPS: dict[str, type[Instr]] = {**PIM_OPS, **HOST_STREAM_OPS, **LINK_OPS, **SYNC_OPS}
