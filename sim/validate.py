"""Static checks of a program against a hardware, before timing or execution.

``validate`` walks every stream once (loops are not unrolled): each Affine operand is
bounded by its minimum and maximum over the ranges of its loop variables and of ``ch``,
and every bound is checked against the hardware and the buffers. The first broken rule
raises ProgramError naming the stream, the instruction path (``body[2].loop[i][1]``),
the mnemonic and the rule.
"""

from __future__ import annotations

from typing import NoReturn

from .errors import ProgramError
from .hardware import DTYPE_BYTES, Hardware
from .host_ops import HOST_OPS
from .hwio import load_hardware
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
    RdAcc,
    RdBank,
    Signal,
    Wait,
    WrAcc,
    WrBank,
    WrGb,
)
from .program import Loop, Node, Program, Stream

__all__ = ["validate"]

EW_FUNCTIONS = ("mov", "add", "mul")
_UNIT_OPS = (Mac, Ew, Af, ClrAcc, WrAcc, RdAcc)  # one register per unit: banks must not share one
_LANE_OPS = (Ew, WrAcc)  # a register and a column must have the same width


class _Checker:
    """Checks one stream; ``where`` is the current "stream path op" prefix."""

    def __init__(self, program: Program, hw: Hardware, stream: Stream) -> None:
        self.hw, self.stream = hw, stream
        self.sizes = {b.name: b.size for b in program.buffers}
        pim = stream.engine == "pim"
        self.ranges: dict[str, int] = {"ch": len(stream.channels)} if pim else {}
        self.where = stream.name

    def fail(self, rule: str) -> NoReturn:
        raise ProgramError(f"{self.where}: {rule}")

    def bounds(self, a: Affine, what: str) -> tuple[int, int]:
        lo = hi = a.base
        for var, s in a.terms:
            if var not in self.ranges:
                scope = ", ".join(sorted(self.ranges)) or "none"
                self.fail(f"{what} uses unbound variable {var!r} (in scope: {scope})")
            top = s * (max(self.ranges[var], 1) - 1)
            lo, hi = lo + min(0, top), hi + max(0, top)
        return lo, hi

    def span(self, a: Affine, width: int, limit: int, what: str) -> tuple[int, int]:
        lo, hi = self.bounds(a, what)
        if lo < 0 or hi + width > limit:
            self.fail(f"{what} spans [{lo}, {hi + width}) outside [0, {limit})")
        return lo, hi

    def bufref(self, r: BufRef, what: str, size: int | None = None) -> None:
        if r.buf not in self.sizes:
            self.fail(f"{what} names unknown buffer {r.buf!r} (known: {', '.join(self.sizes)})")
        if not r.shape or any(d <= 0 for d in r.shape):
            self.fail(f"{what} shape {r.shape} must have positive dimensions")
        if size is not None and r.size != size:
            self.fail(f"{what} has {r.size} elements, the instruction moves {size}")
        self.span(r.offset, r.size, self.sizes[r.buf], f"{what} window of {r.buf!r}")

    def per_channel(self, r: BufRef, what: str) -> None:
        """Channels of one stream must write disjoint windows."""
        stride = dict(r.offset.terms).get("ch", 0)
        if len(self.stream.channels) > 1 and abs(stride) < r.size:
            self.fail(f"{what} windows of different channels overlap: give the offset a "
                      f"ch stride of at least {r.size}")

    # ---- walking ----------------------------------------------------------------------
    def nodes(self, nodes: tuple[Node, ...], path: str) -> None:
        for i, node in enumerate(nodes):
            here = f"{path}[{i}]"
            if isinstance(node, Loop):
                self.where = f"{self.stream.name} {here} loop[{node.var}]"
                if node.var in self.ranges:
                    self.fail(f"loop variable {node.var!r} shadows a variable in scope")
                if node.count < 0:
                    self.fail(f"loop count {node.count} must be >= 0")
                self.ranges[node.var] = node.count
                self.nodes(node.body, f"{here}.loop[{node.var}]")
                del self.ranges[node.var]
            else:
                self.where = f"{self.stream.name} {here} {getattr(node, 'op', type(node))}"
                self.instr(node)

    def instr(self, ins: Instr) -> None:
        host = self.stream.engine == "host"
        if not isinstance(ins, Instr):
            self.fail(f"{type(ins).__name__} is not an instruction")
        if host and not isinstance(ins, HostOp | Signal | Wait):
            self.fail("the host stream runs only host ops, signals and waits")
        if not host and isinstance(ins, HostOp):
            self.fail("host ops belong in the host stream, not a PIM stream")
        if isinstance(ins, Signal | Wait):
            return
        if isinstance(ins, HostOp):
            self.host_op(ins)
            return
        if isinstance(ins, WrGb):
            self.bufref(ins.src, "src")
            self.span(ins.gb, ins.src.size, self.hw.gb_elems, "global buffer")
            return
        self.pim(ins)

    def host_op(self, ins: HostOp) -> None:
        spec = HOST_OPS.get(ins.kind)
        if spec is None:
            self.fail(f"unknown host op {ins.kind!r} (known: {', '.join(sorted(HOST_OPS))})")
        if len(ins.ins) != spec.n_in or len(ins.outs) != 1:
            self.fail(f"host op {ins.kind!r} takes {spec.n_in} inputs and 1 output, "
                      f"got {len(ins.ins)} and {len(ins.outs)}")
        for k, r in enumerate(ins.ins):
            self.bufref(r, f"ins[{k}]")
        self.bufref(ins.outs[0], "outs[0]")

    def pim(self, ins: Instr) -> None:
        hw, p = self.hw, self.hw.pim
        nbanks = hw.org.banks_per_channel
        bank, step = ins.bank, getattr(ins, "step", 0)
        if not 0 <= bank < nbanks:
            self.fail(f"bank {bank} outside [0, {nbanks})")
        if not 0 <= step < nbanks:
            self.fail(f"step {step} outside [0, {nbanks})")
        if isinstance(ins, _UNIT_OPS) and step and step % p.banks_per_unit:
            self.fail(f"step {step} makes banks share a unit: use a multiple of "
                      f"banks_per_unit ({p.banks_per_unit})")
        if isinstance(ins, Act):
            self.span(ins.row, 1, hw.org.rows_per_bank, "row")
        ncols = getattr(ins, "ncols", 1)
        if hasattr(ins, "col"):
            if ncols < 1:
                self.fail(f"ncols {ncols} must be >= 1")
            self.span(ins.col, ncols, hw.columns_per_row, "columns")
        if hasattr(ins, "reg"):
            nregs = getattr(ins, "nregs", 1)
            if nregs < 1:
                self.fail(f"nregs {nregs} must be >= 1")
            self.span(ins.reg, nregs, p.registers, "registers")
        if isinstance(ins, _LANE_OPS) and p.register_lanes != p.lanes:
            self.fail(f"{ins.op} needs register_lanes ({p.register_lanes}) == lanes ({p.lanes})")
        if isinstance(ins, Ew | Af) and not p.elementwise:
            self.fail(f"{hw.name} has no in-bank element-wise unit")
        if isinstance(ins, Ew) and ins.fn not in EW_FUNCTIONS:
            self.fail(f"element-wise fn {ins.fn!r} unknown (known: {', '.join(EW_FUNCTIONS)})")
        if isinstance(ins, Af) and ins.fn not in p.activation_functions:
            self.fail(f"activation {ins.fn!r} not on {hw.name} "
                      f"(available: {', '.join(p.activation_functions) or 'none'})")
        if isinstance(ins, Mac):
            self.mac(ins)
        elif isinstance(ins, RdAcc):
            units = len(hw.bank_targets(bank, step))
            self.bufref(ins.dst, "dst", units * ins.nregs * p.register_lanes)
            self.per_channel(ins.dst, "dst")
        elif isinstance(ins, RdBank):
            self.bufref(ins.dst, "dst", ncols * p.lanes)
            self.per_channel(ins.dst, "dst")
        elif isinstance(ins, WrBank):
            self.bufref(ins.src, "src", ncols * p.lanes)

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
        self.span(ins.gb, width, self.hw.gb_elems, "global buffer")


def _program_rules(program: Program, hw: Hardware) -> None:
    names = [b.name for b in program.buffers]
    for b in program.buffers:
        if names.count(b.name) > 1:
            raise ProgramError(f"buffer {b.name!r} is declared twice")
        if b.dtype not in DTYPE_BYTES or b.size <= 0:
            raise ProgramError(f"buffer {b.name!r}: dtype must be one of {sorted(DTYPE_BYTES)} "
                               f"and size > 0, got {b.dtype!r}, {b.size}")
    streams = [s.name for s in program.streams]
    owner: dict[int, str] = {}
    for s in program.streams:
        if streams.count(s.name) > 1:
            raise ProgramError(f"stream name {s.name!r} is used twice")
        if s.engine not in ("host", "pim"):
            raise ProgramError(f"{s.name}: engine {s.engine!r} must be 'host' or 'pim'")
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


def _sync(nodes: tuple[Node, ...], kind: type) -> list[Instr]:
    out: list[Instr] = []
    for n in nodes:
        out += _sync(n.body, kind) if isinstance(n, Loop) else [n] if isinstance(n, kind) else []
    return out


def _token_rules(program: Program) -> None:
    producers: dict[str, set[str]] = {}
    for s in program.streams:
        for sig in _sync(s.body, Signal):
            producers.setdefault(sig.token, set()).add(s.name)
    for tok, who in producers.items():
        if len(who) > 1:
            raise ProgramError(f"token {tok!r} is signalled by streams {sorted(who)}; "
                               "each token needs exactly one producing stream")
    for s in program.streams:
        for w in _sync(s.body, Wait):
            for tok in w.tokens:
                if tok not in producers:
                    raise ProgramError(f"{s.name}: wait on token {tok!r} that no stream "
                                       "signals")


def validate(program: Program, hw: Hardware | str) -> None:
    """Raise ProgramError naming stream, instruction path and rule if ``program`` is invalid.

    ``hw`` is a Hardware or anything :func:`sim.hwio.load_hardware` accepts.
    """
    hw = load_hardware(hw)
    _program_rules(program, hw)
    _token_rules(program)
    for s in program.streams:
        _Checker(program, hw, s).nodes(s.body, "body")
