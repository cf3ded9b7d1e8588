"""Readable assembly for programs: one instruction per line, loops indented.

Operand syntax: ``b<bank>`` for one bank, ``b<bank>:<step>`` for a bank set, affine
expressions as ``base+stride*var``, buffer windows as ``name[offset; shape]``.
"""

from __future__ import annotations

from dataclasses import fields

from .isa import Affine, BufRef, Instr
from .program import Dispatch, Loop, Node, Program

__all__ = ["instr_asm", "program_asm"]

_SKIP = {"bank", "step"}


def _val(v: object) -> str:
    if isinstance(v, Affine):
        return str(v)
    if isinstance(v, BufRef):
        shape = "x".join(str(d) for d in v.shape)
        return f"{v.buf}[{v.offset}; {shape}]"
    if isinstance(v, tuple):
        if v and isinstance(v[0], tuple):  # attrs
            return "{" + ", ".join(f"{k}={x}" for k, x in v) + "}"
        return "(" + ", ".join(_val(x) for x in v) + ")"
    return str(v)


def instr_asm(ins: Instr) -> str:
    """One instruction as ``mnemonic operands``."""
    names = {f.name for f in fields(ins)}
    parts = []
    if "bank" in names:
        step = getattr(ins, "step", 0)
        parts.append(f"b{ins.bank}" + (f":{step}" if step else ""))
    for f in fields(ins):
        if f.name in _SKIP:
            continue
        parts.append(f"{f.name}={_val(getattr(ins, f.name))}")
    return f"{ins.op:<7}" + " ".join(parts)


def _nodes(body: tuple[Node, ...], depth: int, out: list[str]) -> None:
    pad = "  " * depth
    for n in body:
        if isinstance(n, Dispatch):
            out.append(f"{pad}dispatch {n.var} < {n.count} when {_val(n.sel)} "
                       f"taken={n.taken}:")
            _nodes(n.body, depth + 1, out)
        elif isinstance(n, Loop):
            out.append(f"{pad}loop {n.var} < {n.count}:")
            _nodes(n.body, depth + 1, out)
        else:
            out.append(pad + instr_asm(n))


def program_asm(p: Program) -> str:
    """The whole program: buffers, then each stream."""
    out = [f"; program {p.name}"]
    for b in p.buffers:
        out.append(f".buffer {b.name} {b.dtype} {b.size}")
    for s in p.streams:
        chs = s.channels
        where = ""
        if chs:
            contiguous = chs == tuple(range(chs[0], chs[0] + len(chs)))
            where = f" ch{chs[0]}..ch{chs[-1]}" if contiguous else " ch" + ",".join(map(str, chs))
        out.append(f"\n.stream {s.name} {s.engine}{where}")
        _nodes(s.body, 1, out)
    return "\n".join(out) + "\n"
