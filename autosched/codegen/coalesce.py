"""Stream coalescing: PIM streams on consecutive channels that differ only in where they
read and write become one stream over all their channels.

A kernel often lowers a split (attention's sequence chunks, a GEMV's column blocks) as
one stream per channel or channel block, each body a copy of the others with its own
offsets and signal tokens. The program format already states that case as one SPMD
stream whose addresses step with ``ch``; the linker copies each stream once per channel
group of the whole program, so a kernel written as 64 streams makes every other
fragment's body 64 copies. Coalescing restores the SPMD form:

* a run is a maximal sequence of PIM streams of equal width ``w`` on consecutive
  channels whose bodies have one skeleton (instructions, loops, banks, counts, waits
  and buffer names equal) and whose integer bases step by the same amount ``D`` from
  each stream to the next (with ``w > 1`` only where ``D`` is ``w`` times the ``ch``
  stride already there);
* the run becomes its first stream over the union of the channels, each varying base
  given a ``ch`` stride of ``D / w``; the run's signals at each position become the
  first stream's token, and every wait on any of them waits on that token;
* a run whose tokens repeat, or whose merged program the validator refuses, is left as
  it was. Nothing about the timing changes: the engine already simulates streams with
  equal compiled bodies once.
"""

from __future__ import annotations

import dataclasses
import functools

from sim.errors import ProgramError
from sim.hardware import Hardware
from sim.isa import Affine, BufRef, Signal, Wait
from sim.kernels import Kernel
from sim.program import Dispatch, Loop, Node, Program, Stream
from sim.validate import validate

__all__ = ["coalesce", "coalesce_kernel"]


@functools.cache
def _names(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls))


def _operand(v: object, found: list[Affine]) -> object:
    """``v`` with its Affine operands taken out into ``found`` (their terms kept)."""
    if isinstance(v, Affine):
        found.append(v)
        return ("A", v.terms)
    if isinstance(v, BufRef):
        found.append(v.offset)
        return ("R", v.buf, v.offset.terms, v.shape)
    if isinstance(v, tuple) and v and isinstance(v[0], BufRef):
        return tuple(_operand(x, found) for x in v)
    return v


def _skeleton(body: tuple[Node, ...], found: list[Affine], tokens: list[str]) -> tuple:
    """``body`` with every Affine operand and signal token taken out (into ``found`` and
    ``tokens``, in walk order): what the bodies of a run share."""
    out: list[object] = []
    for n in body:
        cls = type(n)
        if cls is Dispatch:  # its selector is the same element on every channel
            out.append(("D", n.var, n.count, n.sel, n.taken, _skeleton(n.body, found, tokens)))
        elif cls is Loop:
            out.append(("L", n.var, n.count, _skeleton(n.body, found, tokens)))
        elif cls is Signal:
            tokens.append(n.token)
            out.append(("S",))
        else:
            out.append((cls, tuple(_operand(getattr(n, f), found) for f in _names(cls))))
    return tuple(out)


def _put(v: object, new: list[Affine]) -> object:
    if isinstance(v, Affine):
        return new.pop()
    if isinstance(v, BufRef):
        return BufRef(v.buf, new.pop(), v.shape)
    if isinstance(v, tuple) and v and isinstance(v[0], BufRef):
        return tuple(_put(x, new) for x in v)
    return v


def _rebuilt(body: tuple[Node, ...], new: list[Affine]) -> tuple[Node, ...]:
    """``body`` with its Affine operands, in walk order, taken from the end of ``new``
    (reversed), loops and signals kept."""
    out: list[Node] = []
    for n in body:
        cls = type(n)
        if cls is Dispatch or cls is Loop:
            out.append(dataclasses.replace(n, body=_rebuilt(n.body, new)))
        elif cls is Signal:
            out.append(n)
        else:
            out.append(cls(**{f: _put(getattr(n, f), new) for f in _names(cls)}))
    return tuple(out)


def _strided(a: Affine, step: int, width: int) -> Affine | None:
    """``a`` of the first stream of a run whose next stream has it ``step`` further: with
    its ``ch`` stride over the merged channels (None: not expressible)."""
    ch = dict(a.terms).get("ch", 0)
    if width > 1:
        return a if step == ch * width else None
    terms = tuple(sorted([(v, s) for v, s in a.terms if v != "ch"] +
                         ([("ch", step)] if step else [])))
    return a if terms == a.terms else Affine(a.base, terms)


_Parts = tuple[tuple, list[int], list[str], list[Affine]]


def _parts(s: Stream) -> _Parts:
    found: list[Affine] = []
    tokens: list[str] = []
    skel = _skeleton(s.body, found, tokens)
    return skel, [a.base for a in found], tokens, found


def _linear(parts: list[_Parts]) -> list[int]:
    """Lengths of the maximal runs, in order, whose skeletons are equal and whose bases
    step by one amount from each stream to the next."""
    out, i = [], 0
    while i < len(parts):
        j = i + 1
        if j < len(parts) and parts[j][0] == parts[i][0]:
            steps = [b - a for a, b in zip(parts[i][1], parts[j][1], strict=True)]
            while j < len(parts) and parts[j][0] == parts[i][0] and all(
                    b == a + (j - i) * d for a, b, d in zip(parts[i][1], parts[j][1], steps,
                                                            strict=True)):
                j += 1
        out.append(j - i)
        i = j
    return out


def _merge(run: list[Stream], parts: list[_Parts]) -> tuple[Stream, dict[str, str]] | None:
    """The run (one skeleton, linear bases) as one stream and its token renames, or None
    when its addresses cannot step with ``ch`` or its tokens repeat."""
    _, bases0, tokens0, affines0 = parts[0]
    steps = [b - a for a, b in zip(bases0, parts[1][1], strict=True)]
    every = [t for p in parts for t in p[2]]
    if len(set(every)) != len(every):
        return None  # a token signalled twice counts twice: renaming would change that
    width = len(run[0].channels)
    new = []
    for a, d in zip(affines0, steps, strict=True):
        got = _strided(a, d, width)
        if got is None:
            return None
        new.append(got)
    body = _rebuilt(run[0].body, new[::-1])
    chans = tuple(c for s in run for c in s.channels)
    renames = {t: t0 for p in parts[1:] for t, t0 in zip(p[2], tokens0, strict=True)}
    return Stream(run[0].name, "pim", chans, body), renames


def _runs(streams: list[Stream]) -> list[list[Stream]]:
    """PIM streams grouped into candidate runs: equal width, each starting where the last
    ended, in channel order."""
    pim = sorted((s for s in streams if s.engine == "pim" and s.channels),
                 key=lambda s: s.channels[0])
    runs: list[list[Stream]] = []
    for s in pim:
        last = runs[-1][-1] if runs else None
        if last is not None and len(s.channels) == len(last.channels) and \
                s.channels[0] == last.channels[-1] + 1:
            runs[-1].append(s)
        else:
            runs.append([s])
    return runs


def _waits(body: tuple[Node, ...], renames: dict[str, str]) -> tuple[Node, ...]:
    out: list[Node] = []
    for n in body:
        if isinstance(n, Loop):
            out.append(dataclasses.replace(n, body=_waits(n.body, renames)))
        elif isinstance(n, Wait) and any(t in renames for t in n.tokens):
            out.append(Wait(tuple(dict.fromkeys(renames.get(t, t) for t in n.tokens))))
        else:
            out.append(n)
    return tuple(out)


def coalesce(program: Program, hw: Hardware) -> Program:
    """``program`` with every run of its PIM streams that is one SPMD body merged (see
    the module docstring); the program itself when there is none."""
    merged: dict[str, Stream] = {}
    dropped: set[str] = set()
    renames: dict[str, str] = {}
    for adjacent in _runs(list(program.streams)):
        if len(adjacent) < 2:
            continue
        parts = [_parts(s) for s in adjacent]
        at = 0
        for n in _linear(parts):
            run, got = adjacent[at:at + n], None
            if n > 1:
                got = _merge(run, parts[at:at + n])
            at += n
            if got is not None:
                merged[run[0].name] = got[0]
                dropped |= {s.name for s in run[1:]}
                renames.update(got[1])
    if not merged:
        return program
    streams = tuple(dataclasses.replace(merged.get(s.name, s),
                                        body=_waits(merged.get(s.name, s).body, renames))
                    for s in program.streams if s.name not in dropped)
    out = dataclasses.replace(program, streams=streams)
    try:
        validate(out, hw)
    except ProgramError:
        return program  # e.g. channels of one stream would write one window
    return out


def coalesce_kernel(kernel: Kernel, hw: Hardware) -> Kernel:
    """``kernel`` with its program coalesced."""
    prog = coalesce(kernel.program, hw)
    return kernel if prog is kernel.program else dataclasses.replace(kernel, program=prog)
