"""Run a program: equal PIM streams folded, streams as coroutines, loops extrapolated.

Every stream is compiled; PIM streams with equal compiled bodies are simulated once (one
representative signals every member's tokens). A system program's groups run on one
representative device each (``dev = 0``), all in the same scheduler. Each simulated
stream is a generator that yields the token it waits for; the scheduler advances streams
in rounds and reports a deadlock when a whole round produces no signal and ends no
stream. Loops without Signal/Wait go to ``extrapolate.run_loop``.
"""

from __future__ import annotations

from collections.abc import Iterator

from ..collector import collector_paused
from ..errors import SimError
from ..hardware import Hardware, Link, System, as_system, require_hardware
from ..program import Program, Stream
from ..sysprog import SystemProgram, validate_system
from ..validate import validate
from .channel import Channel
from .compile import Compiled, Placement, compile_stream
from .extrapolate import run_loop
from .host import HostEngine
from .link import LinkEngine
from .result import SimResult, SystemResult, build_result, system_result
from .sync import SyncTable

__all__ = ["simulate", "simulate_system"]

def _plain(st, nodes: Compiled, env: dict) -> None:
    for fn, a, _ in nodes:
        if fn is None:
            _loop(st, env, a)
        else:
            fn(st, env, a)


def _gen(st, nodes: Compiled, env: dict) -> Iterator[str]:
    for fn, a, g in nodes:
        if fn is None:
            if g:
                var, count, body, _ = a
                for i in range(count):
                    env[var] = i
                    yield from _gen(st, body, env)
            else:
                _loop(st, env, a)
        elif g:
            yield from fn(st, env, a)
        else:
            fn(st, env, a)


def _loop(st, env: dict, a: tuple) -> None:
    run_loop(st, env, a, _plain)


Folded = tuple[Stream, Compiled, list[list[str]], list[Stream]]


def _fold(hw: Hardware, program: Program, producer: dict[str, str], place: Placement,
          prefix: str = "") -> list[Folded]:
    """Compile every stream; PIM streams with equal compiled bodies become one.

    Returns per simulated stream: the first member, its nodes, per Signal node the tokens
    of every member, and the members; fills ``producer`` (token -> stream name, with
    ``prefix``). Equal bodies wait on equal tokens, so the members' timing is identical
    and one representative is exact.
    """
    groups: dict[Compiled, Folded] = {}
    out: list[Folded] = []
    for s in program.streams:
        body, signals = compile_stream(hw, program, s, place)
        for tok in signals:
            producer[tok] = prefix + s.name
        rep = groups.get(body) if s.engine == "pim" else None
        if rep is None:
            rep = (s, body, [[tok] for tok in signals], [s])
            out.append(rep)
            if s.engine == "pim":
                groups[body] = rep
        else:
            for toks, tok in zip(rep[2], signals, strict=True):
                toks.append(tok)
            rep[3].append(s)
    return out


def simulate(program: Program, hw: Hardware, *, extrapolate: bool = True) -> SimResult:
    """Time ``program`` on ``hw``.

    The program is validated first (:func:`sim.validate.validate`): an invalid one raises
    :class:`~sim.errors.ProgramError` and is never timed.

    The cyclic garbage collector is paused meanwhile: the simulator allocates many small
    acyclic tuples, and collections over a large program's objects would dominate.
    """
    hw = require_hardware(hw, "simulate")
    with collector_paused():
        validate(program, hw)  # the one rule set: nothing invalid is ever timed
        return _run(((program, (0,)),), hw, None, 1, extrapolate)[0]


def simulate_system(sp: SystemProgram, system: System | Hardware, *,
                    extrapolate: bool = True) -> SystemResult:
    """Time a system program: every group once on a representative device (the devices
    of a group run alike), groups and links together. Validated first
    (:func:`sim.sysprog.validate_system`)."""
    system = as_system(system, "simulate_system")
    with collector_paused():
        validate_system(sp, system)
        groups = tuple((g.program, g.devices) for g in sp.groups)
        results = _run(groups, system.device, system.link, system.devices, extrapolate)
    return system_result(results, [len(g.devices) for g in sp.groups])


def _run(groups: tuple[tuple[Program, tuple[int, ...]], ...], hw: Hardware,
         link: Link | None, n_devices: int, extrapolate: bool) -> list[SimResult]:
    """Simulate every group's streams together (one shared token table); a result per
    group, its counters scaled by the group's devices."""
    table, producer = SyncTable(), {}
    per_group: list[list[tuple[int, object]]] = []
    active = []
    layout = tuple(devs for _, devs in groups)
    for gi, (program, devs) in enumerate(groups):
        prefix = f"g{gi}." if len(groups) > 1 else ""
        states: list[tuple[int, object]] = []
        for s, body, tokens, members in _fold(hw, program, producer, (devs, layout, n_devices),
                                              prefix):
            st = _state(s, hw, link)
            st.sync, st.cursor, st.extrapolate, st.tokens = table, {}, extrapolate, tokens
            st.members = tuple(m.name for m in members)
            states.append((sum(len(m.channels) for m in members) if s.engine == "pim" else 0,
                           st))
            active.append((prefix + s.name, _gen(st, body, {"ch": 0, "dev": 0})))
        per_group.append(states)
    while active:
        before, still, blocked = table.produced, [], []
        for name, gen in active:
            try:
                blocked.append((name, next(gen)))
                still.append((name, gen))
            except StopIteration:
                pass
        if still and len(still) == len(active) and table.produced == before:
            name, tok = blocked[0]
            why = ("no stream signals it" if tok not in producer
                   else f"its producer {producer[tok]!r} is itself blocked")
            raise SimError(f"deadlock: stream {name!r} waits on token {tok!r} but {why} "
                           f"(blocked: {', '.join(f'{n}->{t}' for n, t in blocked)})")
        active = still
    return [build_result(hw, states, [s.name for s in program.streams], len(devs))
            for states, (program, devs) in zip(per_group, groups, strict=True)]


def _state(s: Stream, hw: Hardware, link: Link | None) -> object:
    if s.engine == "host":
        return HostEngine(s.name)
    if s.engine == "link":
        return LinkEngine(s.name, link)
    return Channel(hw, s.name)
