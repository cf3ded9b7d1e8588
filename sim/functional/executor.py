"""``execute`` and ``execute_system``: run a validated program on real data.

Streams are interleaved exactly as the timing simulator orders them: in program order,
each stream runs until it reaches a Wait whose tokens have no unconsumed signal for it,
then the next stream runs; a full round in which no stream advances is a deadlock.
Each waiter keeps its own cursor per token, so one signal releases every waiting stream.
In a system program every device of a group runs the group's streams on its own memory
and host buffers; a token counts as signalled once every device of its producing group
has signalled it, and ``Send`` copies into another device's host buffer.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import numpy as np

from ..errors import ProgramError, SimError
from ..hardware import Hardware, System, as_system, require_hardware
from ..host_ops import run as run_host_op
from ..isa import Affine, HostOp, Send, Signal, Wait
from ..program import Dispatch, Loop, Node, Program, Stream, walk
from ..sysprog import SystemProgram, validate_system
from ..validate import validate
from .memory import DeviceMemory
from .pim_ops import PIM_HANDLERS
from .state import ChannelState, HostBuffers, Operand

__all__ = ["execute", "execute_system"]


class _Tokens:
    """Signal counts per (token, device), each stream instance's consumed count per
    token, and the devices that must signal a token before it counts (its producer's
    group)."""

    def __init__(self, producers: dict[str, tuple[int, ...]], local: set[str]) -> None:
        self.producers, self.local = producers, local
        self.signals: Counter[tuple[str, int]] = Counter()
        self.seen: Counter[tuple[str, str]] = Counter()

    def count(self, token: str, device: int) -> int:
        if token in self.local:  # signalled inside a dispatch: each device its own
            return self.signals[token, device]
        return min(self.signals[token, d] for d in self.producers.get(token, (0,)))

    def ready(self, stream: str, tokens: tuple[str, ...], device: int = 0) -> bool:
        return all(self.count(t, device) > self.seen[stream, t] for t in tokens)

    def consume(self, stream: str, tokens: tuple[str, ...]) -> None:
        for t in tokens:
            self.seen[stream, t] += 1


class _Device:
    """One device's position in its group, memory and host buffers, and its peers."""

    def __init__(self, pos: int, device: int, mem: DeviceMemory, host: HostBuffers) -> None:
        self.pos, self.device, self.mem, self.host = pos, device, mem, host
        self.groups: list[list[_Device]] = []  # every group's devices, in position order
        self.group = -1


class _StreamRun:
    """One stream's resumable execution on one device (a generator that yields while
    blocked)."""

    def __init__(self, stream: Stream, hw: Hardware, dev: _Device, tokens: _Tokens,
                 label: str) -> None:
        self.stream, self.dev, self.host, self.tokens = stream, dev, dev.host, tokens
        self.name = label
        self.pim = stream.engine == "pim"
        self.state = ChannelState(hw, dev.mem, stream.channels) if self.pim else None
        n = len(stream.channels)
        self.env: dict[str, Operand] = {"dev": dev.pos}
        if self.pim:  # a single channel takes every scalar fast path
            self.env["ch"] = np.arange(n) if n > 1 else 0
        self.executed = 0
        self.trips: list[int] = []  # each dispatch's trips, in execution order
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
            if isinstance(node, Dispatch):
                r = node.sel
                at = int(np.asarray(self.ev(r.offset)).reshape(-1)[0])
                n = int(np.asarray(self.host.read(r.buf, at, 1)).reshape(-1)[0])
                trips = max(0, min(n, node.count))
                self.trips.append(trips)
                for k in range(trips):
                    self.env[node.var] = k
                    yield from self._walk(node.body)
                self.env.pop(node.var, None)
                continue
            if isinstance(node, Loop):
                for k in range(node.count):
                    self.env[node.var] = k
                    yield from self._walk(node.body)
                self.env.pop(node.var, None)
                continue
            if isinstance(node, Wait):
                while not self.tokens.ready(self.name, node.tokens, self.dev.device):
                    self.blocked_on = node.tokens
                    yield
                self.blocked_on = ()
                self.tokens.consume(self.name, node.tokens)
            elif isinstance(node, Signal):
                self.tokens.signals[node.token, self.dev.device] += 1
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
            elif isinstance(node, Send):
                self._send(node)
            else:
                PIM_HANDLERS[type(node)](self.state, node, self.ev, self.host)
        except SimError as e:
            loops = ", ".join(f"{k}={v}" for k, v in self.env.items() if k not in ("ch", "dev"))
            where = f" at {loops}" if loops else ""
            raise SimError(f"stream {self.name!r} {node.op}{where}: {e}") from None

    def _send(self, node: Send) -> None:
        d = self.dev
        peers = d.groups[d.group if node.group < 0 else node.group]
        peer = peers[int(self.ev(node.peer)) % len(peers)]
        r, w = node.src, node.dst
        data = self.host.read(r.buf, self.ev(r.offset), r.size)
        peer.host.write(w.buf, self.ev(w.offset), data)


def execute(program: Program, hw: Hardware | str, mem: DeviceMemory,
            inputs: dict[str, np.ndarray], *,
            trips: dict[str, list[int]] | None = None,
            position: int = 0) -> dict[str, np.ndarray]:
    """Run ``program`` on ``mem`` (mutated) with host buffers bound from ``inputs``, as the
    device at ``position`` of its group (what ``dev`` reads) with no peers to talk to.

    Only bank contents persist between calls: every call starts with all banks
    precharged, global buffers and accumulators at zero, and unbound host buffers at zero.
    ``trips`` (when given) receives each stream's dispatch trips in execution order, the
    path :func:`sim.program.with_trips` hands to the timing simulator. Returns every host
    buffer's final contents, flat float32. Raises ProgramError for a
    malformed program and SimError for a run-time fault (no open row, deadlock).
    """
    hw = require_hardware(hw, "execute")
    _same_hw(mem, hw)
    validate(program, hw)
    host = HostBuffers(program, inputs)
    dev = _Device(position, 0, mem, host)
    dev.groups, dev.group = [[dev]], 0
    tokens = _tokens([program], [(0,)])
    runs = [_StreamRun(s, hw, dev, tokens, s.name) for s in program.streams]
    _run(runs)
    if trips is not None:
        trips.update({r.name: r.trips for r in runs})
    return {name: arr.copy() for name, arr in host.data.items()}


def execute_system(sp: SystemProgram, system: System | Hardware | str,
                   mems: dict[int, DeviceMemory],
                   inputs: dict[int, dict[str, np.ndarray]], *,
                   trips: dict[str, list[int]] | None = None
                   ) -> dict[int, dict[str, np.ndarray]]:
    """Run a system program: device ``d`` uses ``mems[d]`` (mutated) and host inputs
    ``inputs[d]``; returns every device's host buffers. Semantics as :func:`execute`."""
    system = as_system(system, "execute_system")
    validate_system(sp, system)
    hw = system.device
    groups: list[list[_Device]] = []
    for gi, g in enumerate(sp.groups):
        devs = []
        for pos, d in enumerate(g.devices):
            if d not in mems:
                raise ProgramError(f"no memory given for device {d}")
            _same_hw(mems[d], hw)
            devs.append(_Device(pos, d, mems[d], HostBuffers(g.program, inputs.get(d, {}))))
            devs[-1].group = gi
        groups.append(devs)
    tokens = _tokens([g.program for g in sp.groups], [g.devices for g in sp.groups])
    runs = []
    for gi, g in enumerate(sp.groups):
        for dev in groups[gi]:
            dev.groups = groups
            runs += [_StreamRun(s, hw, dev, tokens, f"g{gi}.d{dev.device}.{s.name}")
                     for s in g.program.streams]
    _run(runs)
    if trips is not None:  # by "g{group}.d{device}.{stream}"
        trips.update({r.name: r.trips for r in runs})
    return {dev.device: {n: a.copy() for n, a in dev.host.data.items()}
            for devs in groups for dev in devs}


def _same_hw(mem: DeviceMemory, hw: Hardware) -> None:
    if mem.hw.fingerprint != hw.fingerprint:
        raise ProgramError(f"memory was built for hardware {mem.hw.name!r}, not {hw.name!r}: "
                           "create DeviceMemory(hw) with the hardware you execute on")


def _tokens(programs: list[Program], devices: list[tuple[int, ...]]) -> _Tokens:
    """Each token's producing group's devices."""
    producers: dict[str, tuple[int, ...]] = {}
    local: set[str] = set()
    for prog, devs in zip(programs, devices, strict=True):
        for s in prog.streams:
            def visit(ins: object, _m: int, _d: tuple = devs) -> None:
                if isinstance(ins, Signal):
                    producers[ins.token] = _d
            walk(s.body, visit)
            local |= _dispatched(s.body, False)
    return _Tokens(producers, local)


def _dispatched(body: tuple[Node, ...], inside: bool) -> set[str]:
    """Tokens signalled inside a dispatch (whose trips may differ between devices)."""
    out: set[str] = set()
    for n in body:
        if isinstance(n, Loop):
            out |= _dispatched(n.body, inside or isinstance(n, Dispatch))
        elif inside and isinstance(n, Signal):
            out.add(n.token)
    return out


def _run(runs: list[_StreamRun]) -> None:
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
            stuck = "; ".join(f"{r.name} waits for {', '.join(r.blocked_on)}"
                              for r, _ in active)
            raise SimError(f"deadlock: every unfinished stream is blocked ({stuck}); "
                           "each wait needs a matching signal in another stream")
