"""Static checks of a program against a hardware: the one rule set of the instruction set.

``validate`` walks every stream once (loops are not unrolled): each Affine operand is
bounded by its minimum and maximum over the ranges of its loop variables and of ``ch``,
and every bound is checked against the hardware and the buffers. The first broken rule
raises ProgramError naming the stream, the instruction path (``body[2].loop[i][1]``),
the mnemonic and the rule. The timing simulator and the functional executor call it
before they run anything, so no invalid program is ever timed or executed.
"""

from __future__ import annotations

import weakref
from typing import NoReturn

from .errors import ProgramError
from .hardware import DTYPE_BYTES, Hardware, require_hardware
from .host_ops import arity
from .isa import (
    MAC_MODES,
    Act,
    Af,
    Affine,
    BufRef,
    ClrAcc,
    Ew,
    HostOp,
    Instr,
    Mac,
    Pre,
    RdAcc,
    RdBank,
    Send,
    Signal,
    Wait,
    WrAcc,
    WrBank,
    WrGb,
)
from .program import Dispatch, Loop, Node, Program, Stream, dispatching

__all__ = ["EW_FUNCTIONS", "ENGINES", "check_program", "token_rules", "validate"]

ENGINES = ("host", "pim", "link")

EW_FUNCTIONS = ("mov", "add", "mul")
_UNIT_OPS = (Mac, Ew, Af, ClrAcc, WrAcc, RdAcc)  # one register per unit: banks must not share one
_LANE_OPS = (Ew, WrAcc)  # a register and a column must have the same width
_BANK_OPS = (Act, Pre, Mac, Ew, Af, ClrAcc, WrAcc, RdAcc, RdBank, WrBank)


class _Checker:
    """Checks one stream. The path of the current node is kept as a list and formatted
    only when a rule breaks, so a valid program costs no string building."""

    def __init__(self, program: Program, hw: Hardware, stream: Stream,
                 signals: dict[str, set[str]], waits: list[tuple[str, str]],
                 devices: int = 1, groups: list[dict[str, int]] | None = None) -> None:
        self.hw, self.stream, self.devices = hw, stream, devices
        self.sizes = {b.name: b.size for b in program.buffers}
        self.host = stream.engine == "host"
        self.link = stream.engine == "link"
        self.groups = groups
        self.ranges: dict[str, int] = (
            {"dev": devices} if self.link or self.host else {"ch": len(stream.channels)})
        self.path: list[str | int] = ["body"]  # an int is a node's index
        self.scale = 1  # iterations a dispatch's taken trips are spread over
        self.label = ""
        self.node: Node | None = None  # the instruction being checked
        self.signals, self.waits = signals, waits
        p = hw.pim
        self.nbanks, self.bpu, self.gb = hw.org.banks_per_channel, p.banks_per_unit, hw.gb_elems
        self.ncols, self.rows, self.regs = hw.columns_per_row, hw.org.rows_per_bank, p.registers
        self.multi = len(stream.channels) > 1

    def fail(self, rule: str) -> NoReturn:
        where = "".join(f"[{p}]" if isinstance(p, int) else p for p in self.path)
        label = self.label
        if not label and self.node is not None:
            label = f" {getattr(self.node, 'op', type(self.node).__name__)}"
        raise ProgramError(f"{self.stream.name} {where}{label}: {rule}")

    def span(self, a: Affine, width: int, limit: int, what: str,
             ranges: dict[str, int] | None = None) -> None:
        lo = hi = a.base
        ranges = self.ranges if ranges is None else ranges
        for var, s in a.terms:
            n = ranges.get(var)
            if n is None:
                scope = ", ".join(sorted(ranges)) or "none"
                self.fail(f"{what} uses unbound variable {var!r} (in scope: {scope})")
            top = s * (max(n, 1) - 1)
            if top < 0:
                lo += top
            else:
                hi += top
        if lo < 0 or hi + width > limit:
            self.fail(f"{what} spans [{lo}, {hi + width}) outside [0, {limit})")

    def bufref(self, r: BufRef, what: str, size: int | None = None,
               sizes: dict[str, int] | None = None,
               ranges: dict[str, int] | None = None) -> None:
        sizes = self.sizes if sizes is None else sizes
        n = sizes.get(r.buf)
        if n is None:
            self.fail(f"{what} names unknown buffer {r.buf!r} (known: {', '.join(sizes)})")
        if not r.shape or min(r.shape) <= 0:
            self.fail(f"{what} shape {r.shape} must have positive dimensions")
        if size is not None and r.size != size:
            self.fail(f"{what} has {r.size} elements, the instruction moves {size}")
        self.span(r.offset, r.size, n, f"{what} window of {r.buf!r}", ranges)

    def per_channel(self, r: BufRef, what: str) -> None:
        """Channels of one stream must write disjoint windows."""
        if self.multi:
            stride = next((s for v, s in r.offset.terms if v == "ch"), 0)
            if abs(stride) < r.size:
                self.fail(f"{what} windows of different channels overlap: give the offset a "
                          f"ch stride of at least {r.size}")

    # ---- walking ----------------------------------------------------------------------
    def nodes(self, nodes: tuple[Node, ...]) -> None:
        path = self.path
        depth = len(path)
        path.append("")
        for i, node in enumerate(nodes):
            path[depth] = i
            if type(node) is Loop:
                self.loop(node)
            elif type(node) is Dispatch:
                self.dispatch(node)
            else:
                self.node = node
                self.instr(node)
                self.node = None
        path.pop()

    def loop(self, node: Loop) -> None:
        self.label = f" loop[{node.var}]"
        if node.var in self.ranges:
            self.fail(f"loop variable {node.var!r} shadows a variable in scope")
        if node.count < 0:
            self.fail(f"loop count {node.count} must be >= 0")
        self.label = ""
        self.ranges[node.var] = node.count
        self.path.append(f".loop[{node.var}]")
        outer = self.scale
        self.scale = node.count if dispatching(node) else 1
        self.nodes(node.body)
        self.scale = outer
        self.path.pop()
        del self.ranges[node.var]

    def dispatch(self, node: Dispatch) -> None:
        """A dispatch is a loop of at most ``count`` trips whose trip count the host wrote
        into ``sel`` (one element of a host buffer)."""
        self.label = f" dispatch[{node.var}]"
        # a host buffer element, so ``dev`` (a device's experts' trips) is in scope anywhere
        self.bufref(node.sel, "sel", None, None, {**self.ranges, "dev": self.devices})
        if node.sel.size != 1 or "ch" in node.sel.offset.vars():
            self.fail("a dispatch selects by one element, the same on every channel")
        top = node.count * self.scale  # in a loop of dispatches: over its iterations
        if not 0 <= node.taken <= top:
            self.fail(f"dispatch taken={node.taken} must be in [0, {top}] (count "
                      f"{node.count} per execution)")
        outer, self.scale = self.scale, 1
        self.loop(node)
        self.scale = outer

    def instr(self, ins: Instr) -> None:
        kind = type(ins)
        if kind is Signal:
            self.signals.setdefault(ins.token, set()).add(self.stream.name)
            return
        if kind is Wait:
            self.waits.extend((self.stream.name, t) for t in ins.tokens)
            return
        if not isinstance(ins, Instr):
            self.fail(f"{kind.__name__} is not an instruction")
        if self.link or kind is Send:
            if kind is not Send or not self.link:
                self.fail("a link stream runs only sends, signals and waits, and sends run "
                          "only in link streams")
            self.send(ins)
            return
        if kind is HostOp:
            if not self.host:
                self.fail("host ops belong in the host stream, not a PIM stream")
            self.host_op(ins)
            return
        if self.host:
            self.fail("the host stream runs only host ops, signals and waits")
        if kind is WrGb:
            self.bufref(ins.src, "src")
            self.span(ins.gb, ins.src.size, self.gb, "global buffer")
            return
        self.pim(ins, kind)

    def send(self, ins: Send) -> None:
        self.bufref(ins.src, "src")
        self.span(ins.peer, 1, 1 << 30, "peer")
        if ins.group < 0:
            sizes = self.sizes
        elif self.groups is None or ins.group >= len(self.groups):
            have = len(self.groups) if self.groups else 0
            self.fail(f"send to group {ins.group}: the system program has {have} group(s)")
        else:
            sizes = self.groups[ins.group]
        self.bufref(ins.dst, "dst", ins.src.size, sizes)

    def host_op(self, ins: HostOp) -> None:
        why = arity(ins)
        if why is not None:
            self.fail(why)
        for k, r in enumerate(ins.ins):
            self.bufref(r, f"ins[{k}]")
        self.bufref(ins.outs[0], "outs[0]")

    def pim(self, ins: Instr, kind: type) -> None:
        hw, p = self.hw, self.hw.pim
        if kind not in _BANK_OPS:
            self.fail(f"{kind.__name__} is not a PIM instruction")
        bank, step = ins.bank, getattr(ins, "step", 0)
        if not 0 <= bank < self.nbanks:
            self.fail(f"bank {bank} outside [0, {self.nbanks})")
        if not 0 <= step < self.nbanks:
            self.fail(f"step {step} outside [0, {self.nbanks}): a step that reaches past the "
                      "last bank addresses one bank, which is step 0")
        if step and step % self.bpu and kind in _UNIT_OPS:
            self.fail(f"step {step} makes banks share a unit: use a multiple of "
                      f"banks_per_unit ({self.bpu})")
        if kind is Act:
            self.span(ins.row, 1, self.rows, "row")
            return
        if kind is Pre:
            return
        if kind is Mac or kind is Ew or kind is WrAcc or kind is RdBank or kind is WrBank:
            ncols = getattr(ins, "ncols", 1)
            if ncols < 1:
                self.fail(f"ncols {ncols} must be >= 1")
            self.span(ins.col, ncols, self.ncols, "columns")
        if kind is not RdBank and kind is not WrBank:
            nregs = getattr(ins, "nregs", 1)
            if nregs < 1:
                self.fail(f"nregs {nregs} must be >= 1")
            self.span(ins.reg, nregs, self.regs, "registers")
        if kind in _LANE_OPS and p.register_lanes != p.lanes:
            self.fail(f"{ins.op} needs register_lanes ({p.register_lanes}) == lanes ({p.lanes})")
        if kind is Ew or kind is Af:
            if not p.elementwise:
                self.fail(f"{hw.name} has no in-bank element-wise unit")
            if kind is Ew and ins.fn not in EW_FUNCTIONS:
                self.fail(f"element-wise fn {ins.fn!r} unknown (known: {', '.join(EW_FUNCTIONS)})")
            if kind is Af and ins.fn not in p.activation_functions:
                self.fail(f"activation {ins.fn!r} not on {hw.name} "
                          f"(available: {', '.join(p.activation_functions) or 'none'})")
        elif kind is Mac:
            self.mac(ins)
        elif kind is RdAcc:
            units = len(hw.bank_targets(bank, step))
            if not 0 <= ins.lanes <= p.register_lanes:
                self.fail(f"rdacc lanes={ins.lanes} outside 0..{p.register_lanes} "
                          "(the register's lanes; 0: all)")
            self.bufref(ins.dst, "dst", units * ins.nregs * (ins.lanes or p.register_lanes))
            self.per_channel(ins.dst, "dst")
        elif kind is RdBank:
            if ins.fmt and not self.hw.takes(ins.fmt):
                self.fail(f"rd of {ins.fmt} weights: {hw.name} holds no {ins.fmt} rows "
                          "(formats.weights)")
            self.bufref(ins.dst, "dst", ins.ncols * p.lanes * hw.density(ins.fmt))
            self.per_channel(ins.dst, "dst")
        elif kind is WrBank:
            self.bufref(ins.src, "src", ins.ncols * p.lanes)

    def mac(self, ins: Mac) -> None:
        p = self.hw.pim
        if ins.mode not in MAC_MODES:
            self.fail(f"mac mode {ins.mode!r} unknown (known: {', '.join(MAC_MODES)})")
        if ins.mode == "dot":
            if not p.adder_tree:
                self.fail(f"dot mode needs an adder tree, which {self.hw.name} lacks: use lane")
            self.span(ins.lane, 1, p.register_lanes, "lane")
        elif p.register_lanes != p.lanes:
            self.fail(f"{ins.mode} mode needs register_lanes ({p.register_lanes}) == "
                      f"lanes ({p.lanes})")
        width = ins.ncols if ins.mode == "bcast" else ins.ncols * p.lanes
        if ins.fmt:
            if not self.hw.takes(ins.fmt):
                self.fail(f"mac over {ins.fmt} weights: {self.hw.name}'s units do not take "
                          f"{ins.fmt} (formats.weights)")
            if ins.mode != "dot":
                self.fail(f"mac over {ins.fmt} weights needs dot mode (the adder tree)")
            width *= self.hw.density(ins.fmt)
        self.span(ins.gb, width, self.gb, "global buffer")


def _program_rules(program: Program, hw: Hardware) -> None:
    names: set[str] = set()
    for b in program.buffers:
        if b.name in names:
            raise ProgramError(f"buffer {b.name!r} is declared twice")
        names.add(b.name)
        if b.dtype not in DTYPE_BYTES or b.size <= 0:
            raise ProgramError(f"buffer {b.name!r}: dtype must be one of {sorted(DTYPE_BYTES)} "
                               f"and size > 0, got {b.dtype!r}, {b.size}")
    streams: set[str] = set()
    owner: dict[int, str] = {}
    for s in program.streams:
        if s.name in streams:
            raise ProgramError(f"stream name {s.name!r} is used twice")
        streams.add(s.name)
        if s.engine not in ENGINES:
            raise ProgramError(f"{s.name}: engine {s.engine!r} must be one of "
                               f"{', '.join(ENGINES)}")
        if s.engine != "pim":
            continue
        if not s.channels:
            raise ProgramError(f"{s.name}: a PIM stream needs at least one channel")
        for c in s.channels:
            if not 0 <= c < hw.org.channels:
                raise ProgramError(f"{s.name}: channel {c} outside [0, {hw.org.channels})")
            if c in owner:
                raise ProgramError(f"{s.name}: channel {c} is already used by stream "
                                   f"{owner[c]!r}; PIM streams need disjoint channels")
            owner[c] = s.name


def token_rules(signals: dict[str, set[str]], waits: list[tuple[str, str]]) -> None:
    """Each token has one producing stream, and every waited token is signalled."""
    for tok, who in signals.items():
        if len(who) > 1:
            raise ProgramError(f"token {tok!r} is signalled by streams {sorted(who)}; "
                               "each token needs exactly one producing stream")
    for stream, tok in waits:
        if tok not in signals:
            raise ProgramError(f"{stream}: wait on token {tok!r} that no stream signals")


# Programs already found valid, by (id, hardware fingerprint): programs are immutable, so
# compiling, then timing, then executing one program checks it once.
_VALID: weakref.WeakValueDictionary[tuple[int, str], Program] = weakref.WeakValueDictionary()


def validate(program: Program, hw: Hardware | str) -> None:
    """Raise ProgramError naming stream, instruction path and rule if ``program`` is invalid.

    ``hw`` is a Hardware or anything :func:`sim.hwio.load_hardware` accepts.
    """
    hw = require_hardware(hw, "validate")
    key = (id(program), hw.fingerprint)
    if _VALID.get(key) is program:
        return
    signals: dict[str, set[str]] = {}
    waits: list[tuple[str, str]] = []
    check_program(program, hw, signals, waits)
    token_rules(signals, waits)
    _VALID[key] = program


def check_program(program: Program, hw: Hardware, signals: dict[str, set[str]],
                  waits: list[tuple[str, str]], *, devices: int = 1,
                  groups: list[dict[str, int]] | None = None, prefix: str = "") -> None:
    """Every rule of one program except the token rules, whose inputs it collects:
    ``signals`` (token -> producing streams) and ``waits`` (stream, token). ``devices``
    is the size of the program's device group (the range of ``dev``), ``groups`` the
    buffer sizes of every group of a system program (for sends to other groups), and
    ``prefix`` names the group in stream names."""
    _program_rules(program, hw)
    for s in program.streams:
        named = Stream(prefix + s.name, s.engine, s.channels, s.body) if prefix else s
        _Checker(program, hw, named, signals, waits, devices, groups).nodes(s.body)
