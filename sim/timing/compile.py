"""Turn a validated stream body into nodes the engine runs without re-checking.

The program was checked by :func:`sim.validate.validate` (the engine calls it first), so
nothing here re-states a rule of the instruction set. A node is ``(fn, args, flag)``:
``fn(state, env, args)`` performs one instruction; a loop is ``(None, (var, count, body,
gb_dep), has_sync)``; ``flag`` marks a generator (Wait, or a loop containing Signal/Wait,
which is never extrapolated). Nodes carry only what timing depends on (no buffer names,
rows or columns; a Signal carries its ordinal in the stream, not its token), so two
streams whose compiled bodies are equal time identically and the engine may simulate
them once.
"""

from __future__ import annotations

from ..hardware import DTYPE_BYTES, Hardware
from ..isa import (
    Act,
    Af,
    Affine,
    ClrAcc,
    Ew,
    Instr,
    Mac,
    Pre,
    RdAcc,
    RdBank,
    Send,
    Signal,
    Wait,
    WrAcc,
    WrGb,
)
from ..program import Dispatch, Loop, Node, Program, Stream, dispatching
from . import sync
from .channel import Channel
from .host import HostEngine, host_op_args
from .link import LinkEngine
from .stats import Count

__all__ = ["Compiled", "Placement", "compile_stream"]

Compiled = tuple[tuple, ...]
# (devices of the stream's group, devices of every group, devices in the system)
Placement = tuple[tuple[int, ...], tuple[tuple[int, ...], ...], int]
_ALONE: Placement = ((0,), ((0,),), 1)


class _Ctx:
    """What compiling one stream needs: hardware, program, loop ranges, tokens, and
    where the stream's group sits in the system."""

    def __init__(self, hw: Hardware, prog: Program, stream: Stream,
                 place: Placement = _ALONE) -> None:
        self.hw, self.prog, self.stream, self.place = hw, prog, stream, place
        self.ranges: dict[str, int] = {"ch": max(1, len(stream.channels))}
        self.signals: list[str] = []
        self.dtypes = {b.name: b.dtype for b in prog.buffers}
        self.memo: dict[tuple[int, int], tuple] = {}

    def targets(self, bank: int, step: int) -> tuple:
        """(banks, groups, units) addressed by ``bank``/``step``; memoised per stream."""
        got = self.memo.get((bank, step))
        if got is None:
            hw = self.hw
            banks = tuple(hw.bank_targets(bank, step))
            groups = tuple(sorted({b // hw.banks_per_group for b in banks}))
            units = tuple(sorted({b // hw.pim.banks_per_unit for b in banks}))
            got = self.memo[(bank, step)] = (banks, groups, units)
        return got

    def gb(self, gb: Affine, span: int) -> tuple:
        """Global-buffer operand: constant slots, or None to evaluate per iteration."""
        lanes = self.hw.pim.lanes
        if gb.terms:
            return None, gb, span
        return tuple(range(gb.base // lanes, (gb.base + span - 1) // lanes + 1)), gb, span


def _pim(cx: _Ctx, ins: Instr) -> tuple:
    p = cx.hw.pim
    if isinstance(ins, Act):
        banks, groups, _ = cx.targets(ins.bank, ins.step)
        return Channel.act, (banks, groups, 4 if len(banks) > 1 else 1)
    if isinstance(ins, Pre):
        return Channel.pre, (cx.targets(ins.bank, ins.step)[0],)
    if isinstance(ins, Mac):
        span = ins.ncols * (1 if ins.mode == "bcast" else p.lanes)
        if ins.fmt:  # denser columns: their own spacing and energy per column
            span *= cx.hw.density(ins.fmt)
            return Channel.pim_col, (Count.MAC, *cx.targets(ins.bank, ins.step), ins.ncols,
                                     *cx.gb(ins.gb, span), ins.fmt)
        return Channel.pim_col, (Count.MAC, *cx.targets(ins.bank, ins.step), ins.ncols,
                                 *cx.gb(ins.gb, span))
    if isinstance(ins, Ew | Af):
        banks, groups, units = cx.targets(ins.bank, ins.step)
        if isinstance(ins, Af):
            return Channel.reg_op, (Count.AF, units, len(units) * p.register_lanes)
        return Channel.pim_col, (Count.EW, banks, groups, units, 1, (), None, 0)
    if isinstance(ins, ClrAcc):
        return Channel.reg_op, (Count.CLR, cx.targets(ins.bank, ins.step)[2], 0)
    if isinstance(ins, WrAcc):
        return Channel.wracc, cx.targets(ins.bank, ins.step)
    if isinstance(ins, WrGb):
        n = ins.src.size
        return Channel.wrgb, (n * cx.hw.elem_bytes, *cx.gb(ins.gb, n))
    if isinstance(ins, RdAcc):
        return Channel.rdacc, (cx.targets(ins.bank, ins.step)[2], ins.nregs, ins.lanes)
    banks, groups, _ = cx.targets(ins.bank, 0)  # RdBank | WrBank
    code = Count.RD if isinstance(ins, RdBank) else Count.WR
    return Channel.bank_io, (code, banks[0], groups[0], ins.ncols)


_PLAIN_BANK = frozenset((Act, Pre, RdBank))  # the commands with no global-buffer operand


def _node(cx: _Ctx, n: Node) -> tuple[tuple, bool, bool]:
    """(node, has_sync, uses a loop variable in a global-buffer address)."""
    if type(n) in _PLAIN_BANK:  # most of a PIM stream (validated: never on the host)
        return (*_pim(cx, n), False), False, False
    if dispatching(n):  # a loop of dispatches: each dispatch's trips over the loop,
        return _round_robin(cx, n)  # taken in turns as the iterations interleave them
    if isinstance(n, Loop):  # a dispatch runs the trips of the path it times
        count = n.taken if isinstance(n, Dispatch) else n.count
        outer = cx.ranges.get(n.var)
        cx.ranges[n.var] = max(1, count)
        body, has_sync, gb_dep = _body(cx, n.body)
        if outer is None:
            del cx.ranges[n.var]
        else:
            cx.ranges[n.var] = outer
        return (None, (n.var, count, body, gb_dep), has_sync), has_sync, gb_dep
    if isinstance(n, Signal):
        cx.signals.append(n.token)
        return (sync.signal, len(cx.signals) - 1, False), True, False
    if isinstance(n, Wait):
        return (sync.wait, tuple(n.tokens), True), True, False
    if cx.stream.engine == "host":
        return (HostEngine.host_op, host_op_args(n, cx.hw, cx.dtypes), False), False, False
    if isinstance(n, Send):
        own, groups, total = cx.place
        targets = own if n.group < 0 else groups[n.group]
        nbytes = n.src.size * DTYPE_BYTES[cx.dtypes[n.src.buf]]
        return (LinkEngine.send, (nbytes, n.peer, own[0], targets, total), False), False, False
    fn, args = _pim(cx, n)
    gb = getattr(n, "gb", None)
    moves = gb is not None and any(v != "ch" for v, _ in gb.terms)
    return (fn, args, False), False, moves


def _round_robin(cx: _Ctx, n: Loop) -> tuple[tuple, bool, bool]:
    """A loop of dispatches as phases: while every dispatch has trips left, one trip of
    each in turn; then of those with trips left, and so on (``taken`` of each)."""
    outer = cx.ranges.get(n.var)
    cx.ranges[n.var] = max(1, n.count)
    trips, has_sync, gb_dep = [], False, False
    for d in n.body:
        node, s, g = _node(cx, Loop(d.var, 1, d.body))
        trips.append((d.taken, node))
        has_sync, gb_dep = has_sync or s, gb_dep or g
    if outer is None:
        del cx.ranges[n.var]
    else:
        cx.ranges[n.var] = outer
    phases, done = [], 0
    for level in sorted({t for t, _ in trips if t > 0}):
        body = tuple(node for t, node in trips if t >= level)
        phases.append((None, (n.var, level - done, body, gb_dep), has_sync))
        done = level
    return (None, (n.var, 1, tuple(phases), gb_dep), has_sync), has_sync, gb_dep


def _body(cx: _Ctx, nodes: tuple[Node, ...]) -> tuple[Compiled, bool, bool]:
    out, has_sync, gb_dep = [], False, False
    for n in nodes:
        node, s, g = _node(cx, n)
        out.append(node)
        has_sync, gb_dep = has_sync or s, gb_dep or g
    return tuple(out), has_sync, gb_dep


def compile_stream(hw: Hardware, prog: Program, stream: Stream,
                   place: Placement = _ALONE) -> tuple[Compiled, list[str]]:
    """The stream's nodes and the token of each Signal node, by its ordinal."""
    cx = _Ctx(hw, prog, stream, place)
    body, _, _ = _body(cx, stream.body)
    return body, cx.signals
