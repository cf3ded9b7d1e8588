"""The local runner: the cycle-level simulator in a pool of worker processes on this machine."""

from __future__ import annotations

import functools
import os
import signal
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

from autosched.measure.record import Measurement
from sim.errors import AutoschedError

from .base import MeasureInput, Runner, measure_one
from .deadline import MEASURE_TIMEOUT_S, within

__all__ = ["LocalRunner"]


def _warm() -> None:
    """Worker initialiser: ignore Ctrl-C (the parent stops the run) and register the
    built-in lowerings once per process."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    from .. import families  # noqa: F401


class LocalRunner(Runner):
    """``workers`` processes (default ``os.cpu_count()``); ``workers=1`` runs in-process.

    The pool starts at the first ``run`` and is reused until :meth:`close`. Workers are
    forked where the platform allows, so lowerings registered by the parent are present.
    ``measure`` (default :func:`measure_one`) makes one record and must be picklable;
    a measurement longer than ``timeout`` seconds is recorded as a failure. A worker
    exception other than :class:`AutoschedError` (which ``measure_one`` already turns
    into a failure record) propagates with a note naming the input; a worker that dies
    takes the pool with it, and the next ``run`` starts a fresh one.
    """

    def __init__(self, workers: int | None = None, *,
                 measure: Callable[[MeasureInput], Measurement] = measure_one,
                 timeout: float | None = MEASURE_TIMEOUT_S) -> None:
        n = (os.cpu_count() or 1) if workers is None else workers
        if type(n) is not int or n < 1:
            raise AutoschedError(f"LocalRunner needs workers >= 1, got {workers!r}")
        if timeout is not None and not timeout > 0:
            raise AutoschedError(f"a measurement time limit must be > 0 s, got {timeout!r}")
        self.workers, self.timeout = n, timeout
        self._one = functools.partial(within, measure, timeout=timeout)
        self._pool: ProcessPoolExecutor | None = None
        self._closed = False

    def run(self, inputs: Sequence[MeasureInput]) -> list[Measurement]:
        if self._closed:
            raise AutoschedError("this LocalRunner is closed; create a new one")
        if self.workers == 1 or len(inputs) <= 1:
            return [_named(self._one, inp) for inp in inputs]
        if self._pool is None:
            self._pool = ProcessPoolExecutor(self.workers, initializer=_warm)
        futures = [self._pool.submit(self._one, inp) for inp in inputs]
        out: list[Measurement] = []
        for fut, inp in zip(futures, inputs, strict=True):
            try:
                out.append(fut.result())
            except BrokenProcessPool as e:
                self._drop_pool()
                e.add_note(f"a worker died while measuring {inp.describe()}")
                raise
            except Exception as e:
                for f in futures:
                    f.cancel()
                e.add_note(f"while measuring {inp.describe()}")
                raise
        return out

    def _drop_pool(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def close(self) -> None:
        self._drop_pool()
        self._closed = True


def _named(fn, inp: MeasureInput) -> Measurement:
    try:
        return fn(inp)
    except Exception as e:
        e.add_note(f"while measuring {inp.describe()}")
        raise
