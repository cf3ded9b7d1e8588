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


_AFF, _REF, _REFS = 0, 1, 2


@functools.cache
def _plan(cls: type) -> tuple[tuple[str, int], ...]:
    """The fields of an instruction class that a rewrite may change (operands), each with
    its kind: an address, a buffer window, a tuple of windows."""
    out = []
    for f in dataclasses.fields(cls):
        if f.type == "Affine":
            out.append((f.name, _AFF))
        elif f.type == "BufRef":
            out.append((f.name, _REF))
        elif f.type.startswith("tuple[BufRef"):
            out.append((f.name, _REFS))
    return tuple(out)


@functools.cache
def _all(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls))


def _new(cls: type, values: dict) -> object:
    """An instance of a frozen dataclass from already-normal field values (no __init__;
    set in field order, as ``__init__`` does, so instances keep their compact layout)."""
    obj = object.__new__(cls)
    for k, v in values.items():
        object.__setattr__(obj, k, v)
    return obj


def _shifted(a: Affine, by: int) -> Affine:
    """``a`` plus ``by`` (no __init__: the terms are already normal)."""
    obj = object.__new__(Affine)
    object.__setattr__(obj, "base", a.base + by)
    object.__setattr__(obj, "terms", a.terms)
    return obj


class _Pass:
    """One rewrite applied to a body: the renames are memoised (the linker's renames are
    chains of lookups, asked once per operand)."""

    def __init__(self, rw: Rewrite) -> None:
        self.rw = rw
        self.ch = rw.ch_offset
        self.row = rw.row_base
        self.bufs: dict[str, tuple[str, int]] = {}
        self.toks: dict[str, tuple[str, ...]] = {}

    def tokens(self, t: str) -> tuple[str, ...]:
        got = self.toks.get(t)
        if got is None:
            got = self.toks[t] = tuple(self.rw.tokens(t))
        return got

    def affine(self, a: Affine) -> Affine:
        if self.ch:
            for v, s in a.terms:
                if v == "ch":
                    return _shifted(a, s * self.ch)
        return a

    def ref(self, v: BufRef) -> BufRef:
        got = self.bufs.get(v.buf)
        if got is None:
            got = self.bufs[v.buf] = self.rw.buffers(v.buf)
        name, off = got
        a = self.affine(v.offset)
        if name == v.buf and not off and a is v.offset:
            return v
        return _new(BufRef, {"buf": name, "offset": _shifted(a, off), "shape": v.shape})

    def value(self, v: object, kind: int) -> object:
        if kind == _AFF:
            return self.affine(v)
        if kind == _REF:
            return self.ref(v)
        out = tuple(self.ref(x) for x in v)
        return v if all(a is b for a, b in zip(out, v, strict=True)) else out

    def instr(self, ins: Instr, out: list[Node]) -> None:
        cls = type(ins)
        if cls is Signal:
            out.extend(Signal(t) for t in self.tokens(ins.token))
            return
        if cls is Wait:
            out.append(Wait(tuple(t for tok in ins.tokens for t in self.tokens(tok))))
            return
        changed = None
        for name, kind in _plan(cls):
            old = getattr(ins, name)
            new = self.value(old, kind)
            if new is not old:
                if changed is None:
                    changed = {f: getattr(ins, f) for f in _all(cls)}
                changed[name] = new
        if cls is Act and self.row:
            if changed is None:
                changed = {f: getattr(ins, f) for f in _all(cls)}
            changed["row"] = _shifted(changed["row"], self.row)
        out.append(ins if changed is None else _new(cls, changed))

    def body(self, body: tuple[Node, ...]) -> tuple[Node, ...]:
        out: list[Node] = []
        for n in body:
            cls = type(n)
            if cls is Dispatch:  # its selector is a host buffer like any operand
                out.append(dataclasses.replace(n, body=self.body(n.body), sel=self.ref(n.sel)))
            elif cls is Loop:
                out.append(_new(Loop, {"var": n.var, "count": n.count,
                                       "body": self.body(n.body)}))
            else:
                self.instr(n, out)
        return tuple(out)


def rewrite_body(body: tuple[Node, ...], rw: Rewrite) -> tuple[Node, ...]:
    """``body`` with every instruction rewritten by ``rw`` (loops kept)."""
    return _Pass(rw).body(body)


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
