"""Validate a stream body and turn it into nodes the engine runs without re-checking.

A node is ``(fn, args, flag)``: ``fn(state, env, args)`` performs one instruction; a
loop is ``(None, (var, count, body, gb_dep), has_sync)``; ``flag`` marks a generator
(Wait, or a loop containing Signal/Wait, which is never extrapolated). Operand ranges are
checked once over every loop iteration and channel, so the hot path checks nothing.
Nodes carry only what timing depends on (no buffer names, rows or columns; a Signal
carries its ordinal in the stream, not its token), so two streams whose compiled bodies
are equal time identically and the engine may simulate them once.
"""

from __future__ import annotations

from ..errors import ProgramError
from ..hardware import Hardware
from ..isa import (
    MAC_MODES,
    Act,
    Af,
    Affine,
    ClrAcc,
    Ew,
    HostOp,
    Instr,
    Mac,
    Pre,
    RdAcc,
    RdBank,
    Signal,
    Wait,
    WrAcc,
    WrBank,
    WrGb,
)
from ..program import Loop, Node, Program, Stream
from . import sync
from .channel import Channel
from .host import HostEngine, host_op_args
from .stats import C

__all__ = ["Compiled", "compile_stream"]

Compiled = tuple[tuple, ...]


class _Ctx:
    """What compiling one stream needs: hardware, program, loop ranges, tokens."""

    def __init__(self, hw: Hardware, prog: Program, stream: Stream) -> None:
        self.hw, self.prog, self.stream = hw, prog, stream
        self.ranges: dict[str, int] = {"ch": max(1, len(stream.channels))}
        self.signals: list[str] = []
        self.dtypes = {b.name: b.dtype for b in prog.buffers}
        self.memo: dict[tuple[int, int, bool], tuple] = {}

    def fail(self, ins: Instr, msg: str) -> ProgramError:
        return ProgramError(f"stream {self.stream.name!r}, {ins.op}: {msg}")

    def span(self, ins: Instr, a: Affine, what: str) -> tuple[int, int]:
        """Lowest and highest value of ``a`` over all loop iterations and channels."""
        lo = hi = a.base
        for v, s in a.terms:
            if v not in self.ranges:
                raise self.fail(ins, f"{what} uses {v!r}, not an enclosing loop variable nor ch")
            ext = s * (self.ranges[v] - 1)
            lo, hi = lo + min(0, ext), hi + max(0, ext)
        return lo, hi

    def within(self, ins: Instr, a: Affine, n: int, limit: int, what: str) -> None:
        lo, hi = self.span(ins, a, what)
        if lo < 0 or hi + n > limit:
            raise self.fail(ins, f"{what} {a} (+{n}) leaves [0, {limit}) for some iteration")

    def buffer(self, ins: Instr, name: str) -> None:
        if name not in self.dtypes:
            raise self.fail(ins, f"unknown buffer {name!r}; declare it in program.buffers")

    def targets(self, ins: Instr, bank: int, step: int, per_unit: bool) -> tuple:
        """(banks, groups, units) addressed by ``bank``/``step``; memoised per stream."""
        key = (bank, step, per_unit)
        got = self.memo.get(key)
        if got is None:
            got = self.memo[key] = self._targets(ins, bank, step, per_unit)
        return got

    def _targets(self, ins: Instr, bank: int, step: int, per_unit: bool) -> tuple:
        hw = self.hw
        nb = hw.org.banks_per_channel
        if not 0 <= bank < nb or step < 0:
            raise self.fail(ins, f"bank {bank} step {step} out of range (banks 0..{nb - 1})")
        banks = tuple(hw.bank_targets(bank, step))
        groups = tuple(sorted({b // hw.banks_per_group for b in banks}))
        units = tuple(sorted({b // hw.pim.banks_per_unit for b in banks}))
        if per_unit and len(units) != len(banks):
            raise self.fail(ins, f"banks {banks} put two banks on one PIM unit "
                            f"({hw.pim.banks_per_unit} banks per unit): use step "
                            f"{hw.pim.banks_per_unit}")
        return banks, groups, units

    def regs(self, ins: Instr, reg: Affine, n: int) -> None:
        if n < 1:
            raise self.fail(ins, f"nregs must be >= 1, got {n}")
        self.within(ins, reg, n, self.hw.pim.registers, "register")

    def gb(self, ins: Instr, gb: Affine, span: int) -> tuple:
        """Global-buffer operand: constant slots, or None to evaluate per iteration."""
        self.within(ins, gb, span, self.hw.gb_elems, "global-buffer address")
        lanes = self.hw.pim.lanes
        if gb.terms:
            return None, gb, span
        return tuple(range(gb.base // lanes, (gb.base + span - 1) // lanes + 1)), gb, span


def _pim(cx: _Ctx, ins: Instr) -> tuple:
    hw, p = cx.hw, cx.hw.pim
    ncol = hw.columns_per_row
    if isinstance(ins, Act):
        banks, groups, _ = cx.targets(ins, ins.bank, ins.step, False)
        cx.within(ins, ins.row, 1, hw.org.rows_per_bank, "row")
        return Channel.act, (banks, groups, 4 if len(banks) > 1 else 1)
    if isinstance(ins, Pre):
        return Channel.pre, (cx.targets(ins, ins.bank, ins.step, False)[0],)
    if isinstance(ins, Mac):
        if ins.mode not in MAC_MODES or (ins.mode == "dot" and not p.adder_tree):
            raise cx.fail(ins, f"mode {ins.mode!r} not available (modes {MAC_MODES}; dot "
                          "needs pim.adder_tree)")
        if ins.ncols < 1:
            raise cx.fail(ins, f"ncols must be >= 1, got {ins.ncols}")
        cx.within(ins, ins.col, ins.ncols, ncol, "column")
        cx.regs(ins, ins.reg, 1)
        span = ins.ncols * (1 if ins.mode == "bcast" else p.lanes)
        return Channel.pim_col, (C.MAC, *cx.targets(ins, ins.bank, ins.step, True), ins.ncols,
                                 *cx.gb(ins, ins.gb, span))
    if isinstance(ins, Ew | Af):
        fns = ("mov", "add", "mul") if isinstance(ins, Ew) else p.activation_functions
        if not p.elementwise or ins.fn not in fns:
            raise cx.fail(ins, f"function {ins.fn!r} not supported by this hardware ({fns})")
        cx.regs(ins, ins.reg, 1)
        banks, groups, units = cx.targets(ins, ins.bank, ins.step, True)
        if isinstance(ins, Af):
            return Channel.reg_op, (C.AF, units, len(units) * p.register_lanes)
        cx.within(ins, ins.col, 1, ncol, "column")
        return Channel.pim_col, (C.EW, banks, groups, units, 1, (), None, 0)
    if isinstance(ins, ClrAcc):
        cx.regs(ins, ins.reg, ins.nregs)
        return Channel.reg_op, (C.CLR, cx.targets(ins, ins.bank, ins.step, True)[2], 0)
    if isinstance(ins, WrAcc):
        cx.regs(ins, ins.reg, 1)
        cx.within(ins, ins.col, 1, ncol, "column")
        return Channel.wracc, cx.targets(ins, ins.bank, ins.step, True)
    if isinstance(ins, WrGb):
        cx.buffer(ins, ins.src.buf)
        n = ins.src.size
        if n < 1:
            raise cx.fail(ins, "source window is empty")
        return Channel.wrgb, (n * hw.elem_bytes, *cx.gb(ins, ins.gb, n))
    if isinstance(ins, RdAcc):
        cx.buffer(ins, ins.dst.buf)
        cx.regs(ins, ins.reg, ins.nregs)
        return Channel.rdacc, (cx.targets(ins, ins.bank, ins.step, True)[2], ins.nregs)
    if isinstance(ins, RdBank | WrBank):
        cx.buffer(ins, ins.dst.buf if isinstance(ins, RdBank) else ins.src.buf)
        banks, groups, _ = cx.targets(ins, ins.bank, 0, False)
        if ins.ncols < 1:
            raise cx.fail(ins, f"ncols must be >= 1, got {ins.ncols}")
        cx.within(ins, ins.col, ins.ncols, ncol, "column")
        code = C.RD if isinstance(ins, RdBank) else C.WR
        return Channel.bank_io, (code, banks[0], groups[0], ins.ncols)
    raise cx.fail(ins, "not a PIM instruction; host work belongs in a host stream")


def _node(cx: _Ctx, n: Node) -> tuple[tuple, bool, bool]:
    """(node, has_sync, uses a loop variable in a global-buffer address)."""
    if isinstance(n, Loop):
        if n.count < 0:
            raise ProgramError(f"stream {cx.stream.name!r}: loop {n.var!r} has count {n.count}")
        outer = cx.ranges.get(n.var)
        cx.ranges[n.var] = max(1, n.count)
        body, has_sync, gb_dep = _body(cx, n.body)
        if outer is None:
            del cx.ranges[n.var]
        else:
            cx.ranges[n.var] = outer
        return (None, (n.var, n.count, body, gb_dep), has_sync), has_sync, gb_dep
    if isinstance(n, Signal):
        cx.signals.append(n.token)
        return (sync.signal, len(cx.signals) - 1, False), True, False
    if isinstance(n, Wait):
        return (sync.wait, tuple(n.tokens), True), True, False
    if cx.stream.engine == "host":
        if not isinstance(n, HostOp):
            raise cx.fail(n, "PIM instruction in a host stream; put it in a PIM stream")
        for r in (*n.ins, *n.outs):
            cx.buffer(n, r.buf)
        return (HostEngine.host_op, host_op_args(n, cx.hw, cx.dtypes), False), False, False
    fn, args = _pim(cx, n)
    gb = getattr(n, "gb", None)
    moves = gb is not None and any(v != "ch" for v, _ in gb.terms)
    return (fn, args, False), False, moves


def _body(cx: _Ctx, nodes: tuple[Node, ...]) -> tuple[Compiled, bool, bool]:
    out, has_sync, gb_dep = [], False, False
    for n in nodes:
        node, s, g = _node(cx, n)
        out.append(node)
        has_sync, gb_dep = has_sync or s, gb_dep or g
    return tuple(out), has_sync, gb_dep


def compile_stream(hw: Hardware, prog: Program, stream: Stream) -> tuple[Compiled, list[str]]:
    """The stream's nodes and the token of each Signal node, by its ordinal."""
    cx = _Ctx(hw, prog, stream)
    body, _, _ = _body(cx, stream.body)
    return body, cx.signals
