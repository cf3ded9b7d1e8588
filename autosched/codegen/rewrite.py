"""Program rewriting: rename buffers and tokens, shift rows, move the channel origin.

These are the only edits the linker makes to a lowered fragment, so every lowering can
be written as if it owned the whole device: rows from 0, its own buffer and token names.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable

from sim.isa import Act, Affine, BufRef, Instr, Signal, Wait
from sim.program import Dispatch, Loop, Node

__all__ = ["Rewrite", "affine_range", "max_row", "rewrite_body"]


def _same(name: str) -> tuple[str, int]:
    return name, 0


def _one(token: str) -> tuple[str, ...]:
    return (token,)


@dataclasses.dataclass(frozen=True)
class Rewrite:
    """What to change: buffer renames (new name, element offset of the window), token
    renames (one token may become several), a row offset, a channel-position offset."""

    buffers: Callable[[str], tuple[str, int]] = _same
    tokens: Callable[[str], tuple[str, ...]] = _one
    row_base: int = 0
    ch_offset: int = 0


def _affine(a: Affine, rw: Rewrite) -> Affine:
    if not rw.ch_offset:
        return a
    stride = dict(a.terms).get("ch", 0)
    return Affine(a.base + stride * rw.ch_offset, a.terms) if stride else a


def _value(v: object, rw: Rewrite) -> object:
    if isinstance(v, Affine):
        return _affine(v, rw)
    if isinstance(v, BufRef):
        name, off = rw.buffers(v.buf)
        a = _affine(v.offset, rw)
        if name == v.buf and not off and a is v.offset:
            return v
        return _new(BufRef, {"buf": name, "offset": Affine(a.base + off, a.terms),
                             "shape": v.shape})
    if isinstance(v, tuple) and v and isinstance(v[0], BufRef):
        out = tuple(_value(x, rw) for x in v)
        return v if all(a is b for a, b in zip(out, v, strict=True)) else out
    return v


@functools.cache
def _names(cls: type) -> tuple[str, ...]:
    """The fields of an instruction class that a rewrite may change (operands)."""
    return tuple(f.name for f in dataclasses.fields(cls)
                 if f.type in ("Affine", "BufRef") or f.type.startswith("tuple[BufRef"))


def _new(cls: type, values: dict) -> object:
    """An instance of a frozen dataclass from already-normal field values (no __init__)."""
    obj = object.__new__(cls)
    for k, v in values.items():
        object.__setattr__(obj, k, v)
    return obj


def _instr(ins: Instr, rw: Rewrite) -> list[Instr]:
    if isinstance(ins, Signal):
        return [Signal(t) for t in rw.tokens(ins.token)]
    if isinstance(ins, Wait):
        return [Wait(tuple(t for tok in ins.tokens for t in rw.tokens(tok)))]
    changes = {}
    for name in _names(type(ins)):
        old = getattr(ins, name)
        new = _value(old, rw)
        if new is not old:
            changes[name] = new
    if isinstance(ins, Act) and rw.row_base:
        r = changes.get("row", ins.row)
        changes["row"] = Affine(r.base + rw.row_base, r.terms)
    if not changes:
        return [ins]
    return [_new(type(ins), {**{f: getattr(ins, f) for f in _all(type(ins))}, **changes})]


@functools.cache
def _all(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls))


def rewrite_body(body: tuple[Node, ...], rw: Rewrite) -> tuple[Node, ...]:
    """``body`` with every instruction rewritten by ``rw`` (loops kept)."""
    out: list[Node] = []
    for n in body:
        if isinstance(n, Dispatch):  # its selector is a host buffer like any operand
            out.append(dataclasses.replace(n, body=rewrite_body(n.body, rw),
                                           sel=_value(n.sel, rw)))
        elif isinstance(n, Loop):
            out.append(Loop(n.var, n.count, rewrite_body(n.body, rw)))
        else:
            out.extend(_instr(n, rw))
    return tuple(out)


def affine_range(a: Affine, bounds: dict[str, int]) -> tuple[int, int]:
    """Smallest and largest value of ``a`` with each var in ``0 .. bounds[var]-1``."""
    lo = hi = a.base
    for v, s in a.terms:
        span = s * (bounds[v] - 1)
        lo, hi = (lo, hi + span) if span >= 0 else (lo + span, hi)
    return lo, hi


def max_row(body: tuple[Node, ...], n_channels: int, bounds: dict[str, int] | None = None) -> int:
    """The largest row any ``act`` in ``body`` opens (-1 when none)."""
    bounds = dict(bounds or {}, ch=n_channels)
    top = -1
    for n in body:
        if isinstance(n, Loop):
            top = max(top, max_row(n.body, n_channels, {**bounds, n.var: n.count}))
        elif isinstance(n, Act):
            top = max(top, affine_range(n.row, bounds)[1])
    return top
