"""Run a program: equal PIM streams folded, streams as coroutines, loops extrapolated.

Every stream is compiled; PIM streams with equal compiled bodies are simulated once (one
representative signals every member's tokens). Each simulated stream is a generator that
yields the token it waits for; the scheduler advances streams in rounds and reports a
deadlock when a whole round produces no signal and ends no stream. Loops without
Signal/Wait go to ``extrapolate.run_loop``.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator

from ..errors import SimError
from ..hardware import Hardware
from ..hwio import load_hardware
from ..program import Program, Stream
from ..validate import validate
from .channel import Channel
from .compile import Compiled, compile_stream
from .extrapolate import run_loop
from .host import HostEngine
from .result import SimResult, build_result
from .sync import SyncTable

__all__ = ["simulate"]

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


def _fold(hw: Hardware, program: Program, producer: dict[str, str]) -> list[Folded]:
    """Compile every stream; PIM streams with equal compiled bodies become one.

    Returns per simulated stream: the first member, its nodes, per Signal node the tokens
    of every member, and the members; fills ``producer`` (token -> stream name). Equal
    bodies wait on equal tokens, so the members' timing is identical and one
    representative is exact.
    """
    groups: dict[Compiled, Folded] = {}
    out: list[Folded] = []
    for s in program.streams:
        body, signals = compile_stream(hw, program, s)
        for tok in signals:
            producer[tok] = s.name
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


def simulate(program: Program, hw: Hardware | str, *, extrapolate: bool = True) -> SimResult:
    """Time ``program`` on ``hw`` (a Hardware or anything ``load_hardware`` accepts).

    The program is validated first (:func:`sim.validate.validate`): an invalid one raises
    :class:`~sim.errors.ProgramError` and is never timed.

    The cyclic garbage collector is paused meanwhile: the simulator allocates many small
    acyclic tuples, and collections over a large program's objects would dominate.
    """
    paused = gc.isenabled()
    gc.disable()
    try:
        return _simulate(program, load_hardware(hw), extrapolate)
    finally:
        if paused:
            gc.enable()


def _simulate(program: Program, hw: Hardware, extrapolate: bool) -> SimResult:
    validate(program, hw)  # the one rule set: nothing invalid is ever timed
    table, producer = SyncTable(), {}
    states: list[tuple[int, Channel | HostEngine]] = []
    active = []
    for s, body, tokens, members in _fold(hw, program, producer):
        st = HostEngine(s.name) if s.engine == "host" else Channel(hw, s.name)
        st.sync, st.cursor, st.extrapolate, st.tokens = table, {}, extrapolate, tokens
        st.members = tuple(m.name for m in members)
        states.append((sum(len(m.channels) for m in members) if s.engine == "pim" else 0, st))
        active.append((s.name, _gen(st, body, {"ch": 0})))
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
    return build_result(hw, states, [s.name for s in program.streams])
