"""Programs: streams of instructions per engine, compact loops, host buffers.

A ``Program`` is frozen and hashable. A PIM stream runs the same body on every channel
of its ``channels`` tuple (``ch`` in an Affine is the position in that tuple); channel
sets of PIM streams are disjoint. Streams meet only through Signal/Wait tokens, and each
token has one producing stream. JSON round trip: ``Program.from_json(p.to_json()) == p``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Union

from .errors import ProgramError
from .isa import ALL_OPS, Affine, BufRef, Instr, Signal

__all__ = ["Buffer", "Dispatch", "Loop", "Node", "Program", "Stream", "dispatching", "walk",
           "with_trips"]


@dataclass(frozen=True)
class Loop:
    """``count`` iterations of ``body`` with ``var`` = 0 .. count-1."""

    var: str
    count: int
    body: tuple[Node, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "body", tuple(self.body))


@dataclass(frozen=True)
class Dispatch(Loop):
    """Data-dependent dispatch: ``body`` runs ``min(n, count)`` times with ``var`` = 0 ..,
    ``n`` being the value the host wrote into the one-element window ``sel`` before the
    stream reached it (the functional simulator reads it; 0 skips the body). The timing
    simulator and the bound take ``taken`` trips: the path the compiler expects, or the
    one a functional run recorded (:func:`with_trips`); in a loop that holds nothing but
    dispatches (one per expert of a group), ``taken`` counts the trips over all of the
    loop's iterations. Static checks see a loop of ``count``: every trip must be valid."""

    sel: BufRef = BufRef("", Affine(), (1,))
    taken: int = 0


Node = Union[Instr, Loop]  # noqa: UP007 (runtime alias used in isinstance-free code)


@dataclass(frozen=True)
class Buffer:
    """A host buffer of ``size`` elements of ``dtype`` (fp16, bf16 or fp32)."""

    name: str
    dtype: str
    size: int


@dataclass(frozen=True)
class Stream:
    """One engine's in-order instruction stream: ``engine`` is "host" or "pim"."""

    name: str
    engine: str
    channels: tuple[int, ...]
    body: tuple[Node, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "channels", tuple(self.channels))
        object.__setattr__(self, "body", tuple(self.body))


@dataclass(frozen=True)
class Program:
    """The accelerator's whole instruction stream set."""

    streams: tuple[Stream, ...]
    buffers: tuple[Buffer, ...]
    name: str = "program"

    def __post_init__(self) -> None:
        object.__setattr__(self, "streams", tuple(self.streams))
        object.__setattr__(self, "buffers", tuple(self.buffers))

    def buffer(self, name: str) -> Buffer:
        for b in self.buffers:
            if b.name == name:
                return b
        raise ProgramError(f"program {self.name!r} has no buffer {name!r}")

    # ---- JSON --------------------------------------------------------------------
    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "buffers": [[b.name, b.dtype, b.size] for b in self.buffers],
            "streams": [
                {"name": s.name, "engine": s.engine, "channels": _channels_out(s.channels),
                 "body": [_node_out(n) for n in s.body]}
                for s in self.streams
            ],
        }

    def to_json(self, indent: int | None = None) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    @classmethod
    def from_dict(cls, d: dict) -> Program:
        try:
            return cls(
                name=d.get("name", "program"),
                buffers=tuple(Buffer(n, t, int(s)) for n, t, s in d["buffers"]),
                streams=tuple(
                    Stream(s["name"], s["engine"], _channels_in(s["channels"]),
                           tuple(_node_in(n) for n in s["body"]))
                    for s in d["streams"]
                ),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise ProgramError(f"malformed program JSON: {type(e).__name__}: {e}") from None

    @classmethod
    def from_json(cls, text: str) -> Program:
        try:
            return cls.from_dict(json.loads(text))
        except json.JSONDecodeError as e:
            raise ProgramError(f"program is not valid JSON: {e}") from None

    def to_asm(self) -> str:
        from .asm import program_asm

        return program_asm(self)


def walk(body: tuple[Node, ...], visit: Callable[[Instr, int], None], mult: int = 1) -> None:
    """Call ``visit(instruction, times)`` for every instruction of ``body``, ``times`` being
    the product of the enclosing loop counts."""
    for n in body:
        if isinstance(n, Dispatch):
            walk(n.body, visit, mult * n.taken)
        elif isinstance(n, Loop) and dispatching(n):  # taken counts every iteration
            for d in n.body:
                walk(d.body, visit, mult * d.taken)
        elif isinstance(n, Loop):
            walk(n.body, visit, mult * n.count)
        else:
            visit(n, mult)


def signals(body: tuple[Node, ...] | list[Node]) -> list[Signal]:
    """Every ``Signal`` of ``body``, loops and dispatches entered, in program order."""
    out: list[Signal] = []
    for n in body:
        if isinstance(n, Loop):
            out.extend(signals(n.body))
        elif isinstance(n, Signal):
            out.append(n)
    return out


def dispatching(loop: Loop) -> bool:
    """Whether ``loop`` (not itself a dispatch) holds nothing but dispatches."""
    return type(loop) is Loop and bool(loop.body) and \
        all(isinstance(n, Dispatch) for n in loop.body)


def with_trips(program: Program, trips: dict[str, list[int]]) -> Program:
    """``program`` with the ``taken`` of each stream's dispatches, in program order,
    replaced by ``trips[stream name]`` (what :func:`sim.functional.execute` recorded):
    the timing simulator then times the path the data took."""
    import dataclasses

    def redo(body: tuple[Node, ...], seq: list[int]) -> tuple[Node, ...]:
        out: list[Node] = []
        for n in body:
            if isinstance(n, Dispatch):
                t = seq.pop(0) if seq else n.taken
                out.append(dataclasses.replace(n, taken=t, body=redo(n.body, seq)))
            elif isinstance(n, Loop) and dispatching(n):  # each dispatch: its iterations' sum
                got = [seq.pop(0) if seq else 0 for _ in range(n.count * len(n.body))]
                out.append(Loop(n.var, n.count, tuple(
                    dataclasses.replace(d, taken=sum(got[i::len(n.body)]))
                    for i, d in enumerate(n.body))))
            elif isinstance(n, Loop):
                out.append(Loop(n.var, n.count, redo(n.body, seq)))
            else:
                out.append(n)
        return tuple(out)

    streams = tuple(dataclasses.replace(s, body=redo(s.body, list(trips.get(s.name, ()))))
                    for s in program.streams)
    return dataclasses.replace(program, streams=streams)


def _channels_out(chs: tuple[int, ...]) -> list | dict:
    if len(chs) > 2 and chs == tuple(range(chs[0], chs[0] + len(chs))):
        return {"start": chs[0], "count": len(chs)}
    return list(chs)


def _channels_in(x: list | dict) -> tuple[int, ...]:
    if isinstance(x, dict):
        return tuple(range(x["start"], x["start"] + x["count"]))
    return tuple(int(c) for c in x)


def _val_out(v: object) -> object:
    if isinstance(v, Affine):
        return v.base if not v.terms else {"base": v.base, "terms": [list(t) for t in v.terms]}
    if isinstance(v, BufRef):
        return {"buf": v.buf, "offset": _val_out(v.offset), "shape": list(v.shape)}
    if isinstance(v, tuple):
        return [_val_out(x) for x in v]
    return v


def _node_out(n: Node) -> dict:
    if isinstance(n, Dispatch):
        return {"op": "dispatch", "var": n.var, "count": n.count, "sel": _val_out(n.sel),
                "taken": n.taken, "body": [_node_out(x) for x in n.body]}
    if isinstance(n, Loop):
        body = [_node_out(x) for x in n.body]
        return {"op": "loop", "var": n.var, "count": n.count, "body": body}
    d = {"op": n.op}
    for f in fields(n):
        v = getattr(n, f.name)
        if v == f.default and f.default in ("", 0):  # an unset optional field (Mac.fmt)
            continue
        d[f.name] = _val_out(v)
    return d


def _val_in(tp: str, v: object) -> object:
    if tp == "Affine":
        if isinstance(v, dict):
            return Affine(int(v["base"]), tuple((str(a), int(b)) for a, b in v["terms"]))
        return Affine(int(v))
    if tp == "BufRef":
        return BufRef(v["buf"], _val_in("Affine", v["offset"]), tuple(v["shape"]))
    if tp.startswith("tuple[BufRef"):
        return tuple(_val_in("BufRef", x) for x in v)
    if tp.startswith("tuple[tuple[str"):
        return tuple((str(k), x) for k, x in v)
    if tp.startswith("tuple"):
        return tuple(v)
    return v


def _node_in(d: dict) -> Node:
    op = d["op"]
    if op == "dispatch":
        return Dispatch(d["var"], int(d["count"]), tuple(_node_in(x) for x in d["body"]),
                        _val_in("BufRef", d["sel"]), int(d["taken"]))
    if op == "loop":
        return Loop(d["var"], int(d["count"]), tuple(_node_in(x) for x in d["body"]))
    if op not in ALL_OPS:
        raise ProgramError(f"unknown instruction {op!r} (known: {', '.join(sorted(ALL_OPS))})")
    cls = ALL_OPS[op]
    kw = {f.name: _val_in(str(f.type), d[f.name]) for f in fields(cls) if f.name in d}
    return cls(**kw)
