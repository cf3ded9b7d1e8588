"""``execute``: run a validated program on real data.

Streams are interleaved exactly as the timing simulator orders them: in program order,
each stream runs until it reaches a Wait whose tokens have no unconsumed signal for it,
then the next stream runs; a full round in which no stream advances is a deadlock.
Each waiter keeps its own cursor per token, so one signal releases every waiting stream.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import numpy as np

from ..errors import ProgramError, SimError
from ..hardware import Hardware
from ..host_ops import run as run_host_op
from ..hwio import load_hardware
from ..isa import Affine, HostOp, Signal, Wait
from ..program import Loop, Node, Program, Stream
from ..validate import validate
from .memory import DeviceMemory
from .pim_ops import PIM_HANDLERS
from .state import ChannelState, HostBuffers, Operand

__all__ = ["execute"]


class _Tokens:
    """Signal counts per token and each stream's consumed count per token."""

    def __init__(self) -> None:
        self.signals: Counter[str] = Counter()
        self.seen: Counter[tuple[str, str]] = Counter()

    def ready(self, stream: str, tokens: tuple[str, ...]) -> bool:
        return all(self.signals[t] > self.seen[stream, t] for t in tokens)

    def consume(self, stream: str, tokens: tuple[str, ...]) -> None:
        for t in tokens:
            self.seen[stream, t] += 1


class _StreamRun:
    """One stream's resumable execution (a generator that yields while blocked)."""

    def __init__(self, stream: Stream, hw: Hardware, mem: DeviceMemory, host: HostBuffers,
                 tokens: _Tokens) -> None:
        self.stream, self.host, self.tokens = stream, host, tokens
        self.pim = stream.engine == "pim"
        self.state = ChannelState(hw, mem, stream.channels) if self.pim else None
        n = len(stream.channels)
        self.env: dict[str, Operand] = {}
        if self.pim:  # a single channel takes every scalar fast path
            self.env["ch"] = np.arange(n) if n > 1 else 0
        self.executed = 0
        self.blocked_on: tuple[str, ...] = ()

    def ev(self, a: Affine) -> Operand:
        v: Operand = a.base
        for name, stride in a.terms:
            v = v + stride * self.env[name]
        return v

    def run(self) -> Iterator[None]:
        yield from self._walk(self.stream.body)

    def _walk(self, nodes: tuple[Node, ...]) -> Iterator[None]:
        for node in nodes:
            if isinstance(node, Loop):
                for k in range(node.count):
                    self.env[node.var] = k
                    yield from self._walk(node.body)
                self.env.pop(node.var, None)
                continue
            if isinstance(node, Wait):
                while not self.tokens.ready(self.stream.name, node.tokens):
                    self.blocked_on = node.tokens
                    yield
                self.blocked_on = ()
                self.tokens.consume(self.stream.name, node.tokens)
            elif isinstance(node, Signal):
                self.tokens.signals[node.token] += 1
            else:
                self._do(node)
            self.executed += 1

    def _do(self, node: Node) -> None:
        try:
            if isinstance(node, HostOp):
                h = self.host
                ins = [h.read(r.buf, self.ev(r.offset), r.size).reshape(r.shape)
                       for r in node.ins]
                out = node.outs[0]
                h.write(out.buf, self.ev(out.offset), run_host_op(node, ins).reshape(1, -1))
            else:
                PIM_HANDLERS[type(node)](self.state, node, self.ev, self.host)
        except SimError as e:
            loops = ", ".join(f"{k}={v}" for k, v in self.env.items() if k != "ch")
            where = f" at {loops}" if loops else ""
            raise SimError(f"stream {self.stream.name!r} {node.op}{where}: {e}") from None


def execute(program: Program, hw: Hardware | str, mem: DeviceMemory,
            inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Run ``program`` on ``mem`` (mutated) with host buffers bound from ``inputs``.

    Only bank contents persist between calls: every call starts with all banks
    precharged, global buffers and accumulators at zero, and unbound host buffers at zero.
    Returns every host buffer's final contents, flat float32. Raises ProgramError for a
    malformed program and SimError for a run-time fault (no open row, deadlock).
    """
    hw = load_hardware(hw)
    if mem.hw != hw:
        raise ProgramError(f"memory was built for hardware {mem.hw.name!r}, not {hw.name!r}: "
                           "create DeviceMemory(hw) with the hardware you execute on")
    validate(program, hw)
    host = HostBuffers(program, inputs)
    tokens = _Tokens()
    runs = [_StreamRun(s, hw, mem, host, tokens) for s in program.streams]
    active = [(r, r.run()) for r in runs]
    while active:
        progressed = False
        for item in list(active):
            r, gen = item
            before = r.executed
            try:
                next(gen)
            except StopIteration:
                active.remove(item)
                progressed = True
                continue
            progressed |= r.executed != before
        if not progressed:
            stuck = "; ".join(f"{r.stream.name} waits for {', '.join(r.blocked_on)}"
                              for r, _ in active)
            raise SimError(f"deadlock: every unfinished stream is blocked ({stuck}); "
                           "each wait needs a matching signal in another stream")
    return {name: arr.copy() for name, arr in host.data.items()}
