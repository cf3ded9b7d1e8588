"""The linker: many lowered fragments -> one program for the whole device.

Each fragment is a :class:`sim.kernels.Kernel` written as if it owned the device (rows
from 0, its own buffer and token names) plus the global names its inputs and output
take. The linker

* plans memory: gives each fragment's weights a disjoint range of rows in every bank
  (checking capacity) and offsets its ``place``;
* splits the channels into the common refinement of every fragment's channel ranges, so
  each refined group is one SPMD stream running the fragments' bodies in order;
* orders the fragments: the host signals ``go`` when a fragment's inputs are ready and
  the fragment's PIM bodies wait for it; the fragment's own host part waits for them;
* renames buffers and tokens so fragments never collide.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from sim.errors import SimError
from sim.hardware import Hardware
from sim.isa import BufRef, HostOp, Signal, Wait, aff
from sim.kernels import Kernel
from sim.program import Buffer, Loop, Node, Program, Stream

from .rewrite import Rewrite, max_row, rewrite_body

__all__ = ["Fragment", "Linked", "link"]


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
    """The linked program, where each fragment's rows went, and how to place all weights."""

    program: Program
    rows: dict[str, tuple[int, int]]  # tag -> (row base, rows)
    fragments: tuple[Fragment, ...]
    row_bytes_used: int = 0
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
    rows, k, kp = int(np.prod(logical[:-1])), logical[-1], padded[-1]
    return Loop("r", rows, (HostOp("copy", (BufRef(local, aff(0, r=kp), (1, k)),),
                                   (BufRef(glob, aff(off, r=k), (1, k)),)),))


def link(fragments: Sequence[Fragment], hw: Hardware, name: str = "model") -> Linked:
    """Link ``fragments`` (in execution order) into one program."""
    groups = _groups(fragments, hw)
    pim_bodies: list[list[Node]] = [[] for _ in groups]
    host: list[Node] = []
    buffers: dict[str, Buffer] = {}
    rows: dict[str, tuple[int, int]] = {}
    next_row = 0
    for f in fragments:
        prog, kern = f.kernel.program, f.kernel
        binds = {b[0]: (b[1], b[2] if len(b) > 2 else 0) for b in f.binds}
        pim = [s for s in prog.streams if s.engine == "pim"]
        # inputs whose padded layout differs from the producer's get a private copy
        copies: list[Node] = []
        for i, local in enumerate(kern.inputs):
            if local in binds and i < len(kern.input_shapes):
                logical, padded = kern.input_shapes[i], kern.padded_shapes[i]
                if padded != logical and int(np.prod(logical[:-1])) > 1:
                    glob, off = binds.pop(local)
                    copies.append(_pad_copy(f"{f.tag}.{local}", glob, off, logical, padded))
        rename = _renamer(f.tag, binds)
        for b in prog.buffers:
            g, off = rename(b.name)
            old = buffers.get(g)
            dtype = "fp32" if b.name in binds else b.dtype
            buffers[g] = Buffer(g, dtype, max(b.size + off, old.size if old else 0))
        producers = {ins.token: s for s in prog.streams for ins in _signals(s.body)}
        base = next_row
        if pim or kern.rows:
            used = max([kern.rows] + [max_row(s.body, len(s.channels)) + 1 for s in pim])
            rows[f.tag] = (base, used)
            next_row += used
        go = f"{f.tag}.go"

        def tokens(t: str, _f: Fragment = f, _p: dict = producers) -> tuple[str, ...]:
            s = _p.get(t)
            if s is None or s.engine == "host":
                return (f"{_f.tag}.{t}",)
            lo, hi = s.channels[0], s.channels[-1] + 1
            return tuple(f"{_f.tag}.{t}@{gi}" for gi, (a, _) in enumerate(groups) if lo <= a < hi)

        host.extend(copies)
        if pim:
            host.append(Signal(go))
        for s in prog.streams:
            if s.engine == "host":
                host.extend(rewrite_body(s.body, Rewrite(rename, tokens)))
                continue
            lo, hi = s.channels[0], s.channels[-1] + 1
            for gi, (a, _) in enumerate(groups):
                if lo <= a < hi:
                    rw = Rewrite(rename, _local_tokens(tokens, gi), base, a - lo)
                    pim_bodies[gi].extend((Wait((go,)), *rewrite_body(s.body, rw)))
    if next_row > hw.org.rows_per_bank:
        need = next_row * hw.org.row_bytes * hw.org.banks_per_channel * hw.org.channels
        raise SimError(f"weights and caches need {need:,} bytes ({next_row} rows per bank); the "
                       f"device has {hw.capacity_bytes:,} ({hw.org.rows_per_bank} rows per bank)")
    streams = [Stream(f"pim{gi}", "pim", range(a, b), tuple(body))
               for gi, ((a, b), body) in enumerate(zip(groups, pim_bodies, strict=True)) if body]
    streams.append(Stream("host", "host", (), tuple(host)))
    prog = Program(tuple(streams), tuple(buffers.values()), name=name)
    used_bytes = next_row * hw.org.row_bytes * hw.org.banks_per_channel * hw.org.channels
    return Linked(prog, rows, tuple(fragments), used_bytes)


def _renamer(tag: str, binds: dict[str, tuple[str, int]]) -> Callable[[str], tuple[str, int]]:
    return lambda b: binds.get(b, (f"{tag}.{b}", 0))


def _local_tokens(tokens: Callable[[str], tuple[str, ...]], gi: int) -> Callable:
    """In a PIM group stream, a signal of a split token produces only this group's part."""

    def fn(t: str) -> tuple[str, ...]:
        names = tokens(t)
        mine = [n for n in names if n.endswith(f"@{gi}")]
        return tuple(mine) if mine else names

    return fn


def _signals(body: tuple[Node, ...]) -> list[Signal]:
    out: list[Signal] = []
    for n in body:
        if isinstance(n, Loop):
            out.extend(_signals(n.body))
        elif isinstance(n, Signal):
            out.append(n)
    return out
