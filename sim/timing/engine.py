"""Run a program: streams as coroutines, loops simulated until periodic, then skipped.

Each stream is a generator that yields the token it waits for; the scheduler advances
streams in rounds and reports a deadlock when a whole round produces no signal and ends
no stream. A loop without Signal/Wait records, after every iteration, the state's
normalised signature; when it equals the one ``p`` iterations earlier (``p`` <= 4, no
refresh in between), whole periods are skipped up to the next refresh due cycle by
shifting every timer and adding the period's counter deltas.
"""

from __future__ import annotations

from collections.abc import Iterator

from ..errors import ProgramError, SimError
from ..hardware import Hardware
from ..hwio import load_hardware
from ..program import Program
from .channel import Channel
from .compile import Compiled, compile_stream
from .host import HostEngine
from .result import SimResult, build_result
from .stats import C
from .sync import SyncTable

__all__ = ["simulate"]

MAX_PERIOD = 4


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
    """A loop without synchronisation, extrapolated when ``st.extrapolate``."""
    var, count, body, gb_dep = a
    if not st.extrapolate:
        for i in range(count):
            env[var] = i
            _plain(st, body, env)
        return
    ctr, hist, i = st.ctr, [], 0
    while i < count:
        env[var] = i
        _plain(st, body, env)
        i += 1
        if i >= count:
            break
        sig = st.signature(gb_dep)
        if sig is None:
            hist.clear()
            continue
        now = st.now()
        hist.append((sig, now, ctr[:]))
        if len(hist) > MAX_PERIOD + 1:
            del hist[0]
        for p in range(1, len(hist)):
            psig, pnow, pctr = hist[-1 - p]
            if psig != sig:
                continue
            if pctr[C.REFRESHES] != ctr[C.REFRESHES]:
                break
            span = now - pnow
            periods = (count - i) // p
            bound = st.bound()
            if span > 0 and bound != float("inf"):
                periods = min(periods, int((bound - 1 - now) // span))
            if periods > 0:
                st.shift(periods * span)
                for j, (x, y) in enumerate(zip(ctr, pctr, strict=True)):
                    ctr[j] = x + periods * (x - y)
                i += periods * p
                hist.clear()
            break


def _check_streams(hw: Hardware, prog: Program) -> None:
    used: dict[int, str] = {}
    for s in prog.streams:
        if s.engine not in ("host", "pim"):
            raise ProgramError(f"stream {s.name!r}: engine {s.engine!r} is neither host nor pim")
        if s.engine != "pim":
            continue
        if not s.channels:
            raise ProgramError(f"PIM stream {s.name!r} has no channels; list at least one")
        for c in s.channels:
            if not 0 <= c < hw.org.channels:
                raise ProgramError(f"stream {s.name!r}: channel {c} out of range "
                                   f"(0..{hw.org.channels - 1})")
            if c in used:
                raise ProgramError(f"streams {used[c]!r} and {s.name!r} both use channel {c}")
            used[c] = s.name
    if len({s.name for s in prog.streams}) != len(prog.streams):
        raise ProgramError("stream names must be unique")


def simulate(program: Program, hw: Hardware | str, *, extrapolate: bool = True) -> SimResult:
    """Time ``program`` on ``hw`` (a Hardware or anything ``load_hardware`` accepts)."""
    hw = load_hardware(hw)
    _check_streams(hw, program)
    table, producer = SyncTable(), {}
    states: list[tuple[int, Channel | HostEngine]] = []
    active = []
    for s in program.streams:
        body, tokens = compile_stream(hw, program, s)
        for tok in tokens:
            if producer.setdefault(tok, s.name) != s.name:
                raise ProgramError(f"token {tok!r} is signalled by streams {producer[tok]!r} "
                                   f"and {s.name!r}; give each its own token")
        st = HostEngine(s.name) if s.engine == "host" else Channel(hw, s.name)
        st.sync, st.cursor, st.extrapolate = table, {}, extrapolate
        states.append((len(s.channels) if s.engine == "pim" else 0, st))
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
    return build_result(hw, states)
