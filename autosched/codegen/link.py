"""The linker: many lowered fragments -> one program for the whole device.

Each fragment is a :class:`sim.kernels.Kernel` written as if it owned the device (rows
from 0, its own buffer and token names) plus the global names its inputs and output
take. The linker

* plans memory (``memplan``): each fragment's weights get rows in the weights region
  (in fragment order, so a weight sits at the same rows in every step of a model) and
  each KV cache rows in the KV region above; host buffers other than constants and
  outputs share an arena by liveness; buffers a kernel stages on the host (weights or
  KV rows read out of the banks on their way to the host's compute, ``Kernel.staged``)
  share a ``stage`` arena that the device's memory budget does not hold;
* splits the channels into the common refinement of every fragment's channel ranges, so
  each refined group is one SPMD stream running the fragments' bodies in order; link
  streams (collectives) become one link stream;
* orders the fragments: the host signals ``go`` when a fragment's inputs are ready and
  the fragment's PIM and link bodies wait for it; the fragment's own host part waits for
  them. PIM bodies that read no input (weights streamed to the host) wait for the ``go``
  of the fragment ``prefetch`` places earlier instead, so they overlap the host's work
  on the fragments between (the channels they use still serialise in their streams);
* renames buffers and tokens so fragments never collide. A buffer named ``@name`` in a
  send's destination is another device group's global buffer ``name``: not renamed.
  Buffers that sends write (another device may write them while this one is elsewhere)
  are kept whole, out of the arena.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from sim.errors import SimError
from sim.hardware import Hardware
from sim.isa import BufRef, HostOp, Send, Signal, Wait, WrBank, WrGb, aff
from sim.kernels import Kernel
from sim.program import Buffer, Node, Program, Stream, signals, walk

from .memplan import Live, MemoryPlan, nbytes, pack, row_index_bytes
from .rewrite import Rewrite, max_row, rewrite_body

__all__ = ["PREFETCH", "Fragment", "Linked", "link"]

PREFETCH = 4  # fragments an input-free PIM body may run ahead of its own


@dataclass(frozen=True)
class Fragment:
    """A lowered operator: ``kernel`` and where each local input/output lives globally.

    ``binds`` holds ``(local, global)`` or ``(local, global, offset)``: the local buffer
    is the window of the global one starting at element ``offset`` (a view, no copy).
    """

    tag: str
    kernel: Kernel
    binds: tuple[tuple, ...]


@dataclass
class Linked:
    """The linked program, where each fragment's rows went, how to place all weights,
    and the device's memory budget."""

    program: Program
    rows: dict[str, tuple[int, int]]  # tag -> (row base, rows)
    fragments: tuple[Fragment, ...]
    budget: MemoryPlan
    _by_tag: dict[str, Fragment] = field(default_factory=dict)

    def bind(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Flatten each input and zero-pad it to its (possibly padded) buffer."""
        out = {}
        for name, x in inputs.items():
            flat = np.asarray(x, dtype=np.float32).reshape(-1)
            size = self.program.buffer(name).size
            if flat.size > size:
                raise SimError(f"input {name!r} has {flat.size} elements, buffer holds {size}")
            out[name] = np.concatenate([flat, np.zeros(size - flat.size, np.float32)])
        return out

    def place(self, mem: object, tensors: dict[str, dict[str, np.ndarray]]) -> None:
        """Write each fragment's weight tensors (``tensors[tag]``) into ``mem``."""
        for f in self.fragments:
            if f.tag in tensors:
                base = self.rows.get(f.tag, (0, 0))[0]
                f.kernel.place(_RowOffset(mem, base), tensors[f.tag])


class _RowOffset:
    """A DeviceMemory view whose row 0 is ``base``."""

    def __init__(self, mem: object, base: int) -> None:
        self.mem, self.base = mem, base

    def write(self, ch: int, bank: int, row: int, col_elem: int, values: np.ndarray) -> None:
        self.mem.write(ch, bank, row + self.base, col_elem, values)

    def write_rows(self, ch, bank, row, data) -> None:
        self.mem.write_rows(ch, bank, np.asarray(row) + self.base, data)

    def read(self, ch: int, bank: int, row: int, col_elem: int, n: int) -> np.ndarray:
        return self.mem.read(ch, bank, row + self.base, col_elem, n)


@dataclass
class _Frag:
    """What the first pass learns about one fragment."""

    f: Fragment
    binds: dict[str, tuple[str, int]]
    copies: list[Node]
    device: list[Stream]  # PIM and link streams
    start: int  # index of the fragment whose go the device streams wait for
    rows: int = 0
    kv: bool = False


def _groups(fragments: Sequence[Fragment], hw: Hardware) -> list[tuple[int, int]]:
    cuts = {0, hw.org.channels}
    for f in fragments:
        for s in f.kernel.program.streams:
            if s.engine == "pim" and s.channels:
                lo, hi = s.channels[0], s.channels[-1] + 1
                if s.channels != tuple(range(lo, hi)):
                    raise SimError(f"fragment {f.tag}: stream {s.name} channels are not contiguous")
                cuts |= {lo, hi}
    edges = sorted(cuts)
    return list(zip(edges[:-1], edges[1:], strict=True))


def _pad_copy(local: str, glob: str, off: int, logical: tuple[int, ...],
              padded: tuple[int, ...]) -> Node:
    """Copy ``glob`` (rows of ``k``) into ``local`` (rows of ``kp``, the rest zero)."""
    rows, k, kp = int(np.prod(logical[:-1])), logical[-1], padded[-1]
    dst = BufRef(local, aff(0), (rows, kp))
    return HostOp("copy_cols", (dst,), (BufRef(glob, aff(off), (rows, k)), dst),
                  (("lo", 0), ("hi", k), ("col", 0), ("clear", 1)))


def _reads_inputs(streams: list[Stream], bound: set[str]) -> bool:
    """Whether a PIM or link stream reads a buffer bound to another fragment's data."""
    hit = [False]

    def visit(ins: object, _mult: int) -> None:
        if isinstance(ins, WrGb | WrBank) and ins.src.buf in bound:
            hit[0] = True

    for s in streams:
        if s.engine == "link":
            return True
        walk(s.body, visit)
    return hit[0]


def _analyse(i: int, f: Fragment, prefetch: int) -> _Frag:
    kern = f.kernel
    binds = {b[0]: (b[1], b[2] if len(b) > 2 else 0) for b in f.binds}
    # inputs whose padded layout differs from the producer's get a private copy
    copies: list[Node] = []
    inputs = set(binds)  # locals holding other fragments' data (copied or bound)
    for j, local in enumerate(kern.inputs):
        if local in binds and j < len(kern.input_shapes):
            logical, padded = kern.input_shapes[j], kern.padded_shapes[j]
            if padded != logical and int(np.prod(logical[:-1])) > 1:
                glob, off = binds.pop(local)
                copies.append(_pad_copy(f"{f.tag}.{local}", glob, off, logical, padded))
    device = [s for s in kern.program.streams if s.engine != "host"]
    pim = [s for s in device if s.engine == "pim"]
    early = bool(pim) and not _reads_inputs(device, inputs)
    fr = _Frag(f, binds, copies, device, max(0, i - prefetch) if early else i)
    if pim or kern.rows:
        fr.rows = max([kern.rows] + [max_row(s.body, len(s.channels)) + 1 for s in pim])
        fr.kv = kern.rows > 0
    return fr


def link(fragments: Sequence[Fragment], hw: Hardware, name: str = "model", *,
         constants: frozenset[str] = frozenset(), outputs: frozenset[str] = frozenset(),
         prefetch: int = PREFETCH) -> Linked:
    """Link ``fragments`` (in execution order) into one program.

    ``constants`` (bound at every run) and ``outputs`` are global buffers kept whole; every
    other buffer shares an arena by liveness. The budget is computed, not enforced: the
    caller checks ``linked.budget.fits``.
    """
    frags = [_analyse(i, f, prefetch) for i, f in enumerate(fragments)]
    rows, top = _rows(frags)
    buffers, ranges = _declare(frags)
    received = _received(frags)
    keep = set(constants) | set(outputs) | received
    staged = _staged(frags) - keep
    mapping, decls, arena = _arena({k: b for k, b in buffers.items() if k not in staged},
                                   ranges, keep)
    smap, sdecls, _ = _arena({k: b for k, b in buffers.items() if k in staged}, ranges,
                             set(), prefix="stage")
    mapping.update(smap)
    decls += sdecls
    groups = _groups(fragments, hw)
    program = _emit(frags, groups, mapping, decls, name, rows)
    ri = row_index_bytes(hw)
    weights = sum(fr.rows for fr in frags if fr.rows and not fr.kv)
    budget = MemoryPlan(
        capacity=hw.org.rows_per_bank * ri, row_index=ri, weights=weights * ri,
        weights_data=0, kv=(top - weights) * ri,
        constants=sum(nbytes(b.dtype, b.size) for b in buffers.values() if b.name in constants),
        activations=arena + sum(nbytes(b.dtype, b.size) for b in buffers.values()
                                if b.name in set(outputs) | received))
    return Linked(program, rows, tuple(fragments), budget)


def _rows(frags: list[_Frag]) -> tuple[dict[str, tuple[int, int]], int]:
    """Row base and count per fragment: weights first, then KV caches."""
    rows: dict[str, tuple[int, int]] = {}
    nxt = 0
    for kv in (False, True):
        for fr in frags:
            if fr.rows and fr.kv == kv:
                rows[fr.f.tag] = (nxt, fr.rows)
                nxt += fr.rows
    return rows, nxt


def _renamer(tag: str, binds: dict[str, tuple[str, int]]) -> Callable[[str], tuple[str, int]]:
    def rename(b: str) -> tuple[str, int]:
        if b.startswith("@"):
            return b, 0
        return binds.get(b, (f"{tag}.{b}", 0))

    return rename


def _received(frags: list[_Frag]) -> set[str]:
    """Global buffers a send of this program writes (within the device group)."""
    out: set[str] = set()
    for fr in frags:
        rename = _renamer(fr.f.tag, fr.binds)

        def visit(ins: object, _m: int, _r: Callable = rename) -> None:
            if isinstance(ins, Send) and ins.group < 0:
                out.add(_r(ins.dst.buf)[0])

        for s in fr.device:
            walk(s.body, visit)
    return out


def _declare(frags: list[_Frag]) -> tuple[dict[str, Buffer], dict[str, list[int]]]:
    """Every global buffer (the largest size any fragment needs) and its fragment range."""
    buffers: dict[str, Buffer] = {}
    ranges: dict[str, list[int]] = {}
    for i, fr in enumerate(frags):
        rename = _renamer(fr.f.tag, fr.binds)
        for b in fr.f.kernel.program.buffers:
            g, off = rename(b.name)
            old = buffers.get(g)
            dtype = "fp32" if b.name in fr.binds else b.dtype
            buffers[g] = Buffer(g, dtype, max(b.size + off, old.size if old else 0))
            r = ranges.setdefault(g, [fr.start, i])
            r[0], r[1] = min(r[0], fr.start), max(r[1], i)
        for node in fr.copies:  # a pad copy reads its global source
            src = node.ins[0].buf
            r = ranges.setdefault(src, [i, i])
            r[0], r[1] = min(r[0], i), max(r[1], i)
    return buffers, ranges


def _staged(frags: list[_Frag]) -> set[str]:
    """Global names of the buffers the kernels stage on the host (``Kernel.staged``)."""
    out: set[str] = set()
    for fr in frags:
        rename = _renamer(fr.f.tag, fr.binds)
        out |= {rename(b)[0] for b in fr.f.kernel.staged}
    return out


def _arena(buffers: dict[str, Buffer], ranges: dict[str, list[int]], keep: set[str], *,
           prefix: str = "arena") -> tuple[dict[str, tuple[str, int]], list[Buffer], int]:
    """Global name -> (declared buffer, element offset), the declarations, arena bytes
    (one arena ``{prefix}.{dtype}`` per dtype)."""
    mapping: dict[str, tuple[str, int]] = {}
    decls = [b for b in buffers.values() if b.name in keep]
    total = 0
    for dtype in sorted({b.dtype for b in buffers.values() if b.name not in keep}):
        eb = nbytes(dtype, 1)
        live = [Live(b.name, b.size * eb, *ranges[b.name]) for b in buffers.values()
                if b.name not in keep and b.dtype == dtype]
        offsets, top = pack(live, align=64)
        arena = f"{prefix}.{dtype}"
        for name, off in offsets.items():
            mapping[name] = (arena, off // eb)
        decls.append(Buffer(arena, dtype, max(1, -(-top // eb))))
        total += top
    return mapping, decls, total


def _emit(frags: list[_Frag], groups: list[tuple[int, int]],
          mapping: dict[str, tuple[str, int]], decls: list[Buffer], name: str,
          rows: dict[str, tuple[int, int]]) -> Program:
    pim_bodies: list[list[Node]] = [[] for _ in groups]
    host: list[Node] = []
    link_body: list[Node] = []
    anchors = {fr.start for fr in frags if fr.device}
    waited = [-1] * (len(groups) + 1)  # per device stream (link last): the last go waited
    splits: dict[tuple[int, ...], tuple[int, ...]] = {}

    def split(chans: tuple[int, ...]) -> tuple[int, ...]:
        """The channel groups a stream over ``chans`` was cut into."""
        got = splits.get(chans)
        if got is None:
            lo, hi = chans[0], chans[-1] + 1
            got = splits[chans] = tuple(gi for gi, (a, _) in enumerate(groups) if lo <= a < hi)
        return got

    def wait(gi: int, start: int, go: tuple[str, ...]) -> tuple[Node, ...]:
        """A stream waits once per go (each wait consumes one signal); an earlier go is
        already behind it."""
        if start <= waited[gi]:
            return ()
        waited[gi] = start
        return (Wait(go),)

    for i, fr in enumerate(frags):
        f, prog = fr.f, fr.f.kernel.program
        local = _renamer(f.tag, fr.binds)

        def rename(b: str, _local: Callable = local) -> tuple[str, int]:
            g, off = _local(b)
            if g.startswith("@"):  # another group's buffer, by its own name
                return g[1:], off
            arena, base = mapping.get(g, (g, 0))
            return arena, base + off

        producers = {ins.token: s for s in prog.streams for ins in signals(s.body)}

        def tokens(t: str, _f: Fragment = f, _p: dict = producers) -> tuple[str, ...]:
            s = _p.get(t)
            if s is None or s.engine != "pim":
                return (f"{_f.tag}.{t}",)
            return tuple(f"{_f.tag}.{t}@{gi}" for gi in split(s.channels))

        host.extend(rewrite_body(tuple(fr.copies),
                                 Rewrite(lambda g: mapping.get(g, (g, 0)))))
        if i in anchors:
            host.append(Signal(f"{f.tag}.go"))
        go = (f"{frags[fr.start].f.tag}.go",)
        base = rows.get(f.tag, (0, 0))[0]
        for s in prog.streams:
            if s.engine == "host":
                host.extend(rewrite_body(s.body, Rewrite(rename, tokens)))
            elif s.engine == "link":
                link_body.extend((*wait(len(groups), fr.start, go),
                                  *rewrite_body(s.body, Rewrite(rename, tokens))))
            else:
                for gi in split(s.channels):
                    rw = Rewrite(rename, _local_tokens(tokens, gi, f.tag), base,
                                 groups[gi][0] - s.channels[0])
                    pim_bodies[gi].extend((*wait(gi, fr.start, go), *rewrite_body(s.body, rw)))
    streams = [Stream(f"pim{gi}", "pim", range(a, b), tuple(body))
               for gi, ((a, b), body) in enumerate(zip(groups, pim_bodies, strict=True)) if body]
    if link_body:
        streams.append(Stream("link", "link", (), tuple(link_body)))
    streams.append(Stream("host", "host", (), tuple(host)))
    return Program(tuple(streams), tuple(decls), name=name)


def _local_tokens(tokens: Callable[[str], tuple[str, ...]], gi: int, tag: str) -> Callable:
    """In a PIM group stream, a signal of a split token produces only this group's part."""
    mine = f"@{gi}"

    def fn(t: str) -> tuple[str, ...]:
        names = tokens(t)
        if len(names) > 1 or names[0].endswith(mine):
            own = f"{tag}.{t}{mine}"
            return (own,) if own in names else names
        return names

    return fn

