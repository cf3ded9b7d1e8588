"""Loops without Signal/Wait: simulate until periodic, skip periods, learn refresh crossings.

After each iteration the stream state's normalised signature is taken. A repeat ``p``
iterations later (``p`` <= 4, no refresh in between) makes the loop *learnt*: signature
``S``, period ``p``, span and counter delta per period. Whenever the state equals ``S``
again, whole periods are skipped exactly up to the next refresh due cycle (shift every
timer, add the deltas).

Refresh crossings: from ``S`` just before a refresh, at phase ``phi`` = due - now
(1..span), the crossing is simulated until the state is ``S`` again, ``c`` periods later,
and recorded per phase: ``extra`` cycles beyond ``c`` spans and counter deltas beyond
``c`` periods' deltas. The state and the phase determine the crossing, so a recorded
phase is replayed exactly: whole refresh intervals are then skipped at once (``CHUNK``
crossings at most, then one is simulated again). A phase never seen is simulated, so
the extrapolated run equals the unrolled one. What a loop learnt is kept per stream and
compiled loop body, so the next run of an equal loop starts with it.
"""

from __future__ import annotations

from collections.abc import Callable

from .stats import Count

__all__ = ["CHUNK", "MAX_PERIOD", "run_loop"]

MAX_PERIOD = 4
MIN_CROSSINGS = 2  # a skip across refreshes covers at least this many
CHUNK = 64  # at most this many crossings per skip; then one is simulated again


class Learnt:
    """Periodic behaviour of one loop body on one stream, and its refresh crossings."""

    def __init__(self, sig: tuple, p: int, span: int, delta: list) -> None:
        self.sig, self.p, self.span, self.delta = sig, p, span, delta
        self.samples: dict[int, tuple[int, int, list]] = {}  # phi -> (c, extra, ctr delta)
        self.anchor: tuple | None = None  # (i, now, due, ctr) at S before a crossing

    def sample(self, phi: int) -> tuple[int, int, list] | None:
        """The crossing recorded at phase ``phi``, if any."""
        return self.samples.get(phi)


def run_loop(st, env: dict, a: tuple, run: Callable) -> None:
    """Run compiled loop ``a`` = (var, count, body, gb_dep) on ``st``; ``run(st, body, env)``
    simulates one iteration's body."""
    var, count, body, gb_dep = a
    if not st.extrapolate:
        for i in range(count):
            env[var] = i
            run(st, body, env)
        return
    known: dict = st.learnt
    lrn: Learnt | None = known.get(a)
    if lrn is not None:
        lrn.anchor = None
    hist, i = [], 0
    while i < count:
        env[var] = i
        run(st, body, env)
        i += 1
        if i >= count:
            break
        sig = st.signature(gb_dep)
        if sig is None:
            hist.clear()
            if lrn is not None:
                lrn.anchor = None
            continue
        if lrn is None or sig != lrn.sig:
            lrn = _detect(st, hist, sig) or lrn
            if lrn is None or sig != lrn.sig:
                continue
            known[a] = lrn
        hist.clear()
        i = _at_periodic_state(st, lrn, i, count)


def _detect(st, hist: list, sig: tuple) -> Learnt | None:
    """Record this iteration end; a Learnt when its signature repeats without refresh."""
    now, ctr = st.now(), st.ctr
    hist.append((sig, now, ctr[:]))
    if len(hist) > MAX_PERIOD + 1:
        del hist[0]
    for p in range(1, len(hist)):
        psig, pnow, pctr = hist[-1 - p]
        if psig != sig:
            continue
        if pctr[Count.REFRESHES] != ctr[Count.REFRESHES]:
            return None
        return Learnt(sig, p, now - pnow, [x - y for x, y in zip(ctr, pctr, strict=True)])
    return None


def _at_periodic_state(st, lrn: Learnt, i: int, count: int) -> int:
    """The state is ``lrn.sig`` after ``i`` iterations: close a pending crossing sample,
    skip what can be skipped, open the next sample. Returns the new iteration index."""
    ctr, now, due = st.ctr, st.now(), st.bound()
    if lrn.anchor is not None:
        ai, anow, adue, actr = lrn.anchor
        lrn.anchor = None
        refreshes = ctr[Count.REFRESHES] - actr[Count.REFRESHES]
        if refreshes == 1 and (i - ai) % lrn.p == 0:
            c = (i - ai) // lrn.p
            extra = now - anow - c * lrn.span
            d = [x - y - c * z for x, y, z in zip(ctr, actr, lrn.delta, strict=True)]
            lrn.samples[adue - anow] = (c, extra, d)
    if lrn.samples and due != float("inf") and lrn.span > 0:
        i = _skip_crossings(st, lrn, i, count)
        now = st.now()
    span, p = lrn.span, lrn.p
    periods = (count - i) // p
    bound = st.bound()
    if bound != float("inf") and span > 0:
        periods = min(periods, int((bound - 1 - now) // span))
    if periods > 0:
        _apply(st, periods * span, periods, lrn.delta, None, 0)
        i += periods * p
    if bound != float("inf") and i + p <= count:
        lrn.anchor = (i, st.now(), st.bound(), ctr[:])
    return i


def _skip_crossings(st, lrn: Learnt, i: int, count: int) -> int:
    """Skip whole refresh intervals while every crossing's phase has been recorded."""
    span, p, trefi = lrn.span, lrn.p, st.trefi
    x, due, left = st.now(), st.bound(), (count - i) // p
    used, crossings, extra = 0, 0, [0] * len(st.ctr)
    while crossings < CHUNK:
        m = max(0, (due - 1 - x) // span)
        got = lrn.sample(due - x - m * span)
        if got is None:
            break
        c, e, d = got
        end = x + (m + c) * span + e
        if used + m + c > left or end >= due + trefi:
            break
        x, used, crossings, due = end, used + m + c, crossings + 1, due + trefi
        for j, v in enumerate(d):
            extra[j] += v
    if crossings < MIN_CROSSINGS:
        return i
    _apply(st, x - st.now(), used, lrn.delta, extra, crossings)
    return i + used * p


def _apply(st, cycles: int, periods: int, delta: list, extra: list | None,
           refreshes: int) -> None:
    """Move ``st`` on by ``cycles`` and ``refreshes`` refresh intervals; add counters."""
    st.shift(cycles)
    if refreshes:
        st.skip_refreshes(refreshes)
    ctr = st.ctr
    for j, v in enumerate(delta):
        ctr[j] += periods * v
    if extra is not None:
        for j, v in enumerate(extra):
            ctr[j] += v
