"""A time limit on one measurement: a hang becomes a failure record, not a stuck search.

In the main thread (a pool worker, or the tuning process itself) the limit is SIGALRM,
which also interrupts a sleeping or blocked call; in any other thread (a Dask worker
runs tasks in threads) a watchdog raises the timeout in the measuring thread, which
takes effect at its next Python instruction. Either way :class:`MeasureTimeout`, an
:class:`AutoschedError`, is raised inside the measurement, so ``measure_one`` records it.
"""

from __future__ import annotations

import ctypes
import signal
import threading
from collections.abc import Callable

from sim.errors import AutoschedError

from .base import MeasureInput
from .record import Measurement

__all__ = ["MEASURE_TIMEOUT_S", "MeasureTimeout", "within"]

MEASURE_TIMEOUT_S = 300.0  # default limit of one measurement (this simulator: 0.02-2 s)


class MeasureTimeout(AutoschedError):
    """One measurement ran longer than its runner's limit."""


def within(fn: Callable[[MeasureInput], Measurement], inp: MeasureInput,
           timeout: float | None) -> Measurement:
    """``fn(inp)``, or ``inp``'s failure record once ``timeout`` seconds have passed."""
    if timeout is None:
        return fn(inp)
    msg = f"measurement timed out after {timeout:g} s"

    class Expired(MeasureTimeout):  # raised by class (async): the message comes with it
        def __init__(self) -> None:
            super().__init__(msg)

    lock, state = threading.Lock(), {"running": True, "fired": False}
    main = threading.current_thread() is threading.main_thread()
    if main:
        def on_alarm(_sig, _frame) -> None:
            if state["running"]:
                raise Expired()
        old = signal.signal(signal.SIGALRM, on_alarm)
        signal.setitimer(signal.ITIMER_REAL, timeout)
    else:
        ident = ctypes.c_ulong(threading.get_ident())

        def fire() -> None:
            with lock:
                if state["running"]:
                    state["fired"] = True
                    ctypes.pythonapi.PyThreadState_SetAsyncExc(ident, ctypes.py_object(Expired))
        watchdog = threading.Timer(timeout, fire)
        watchdog.daemon = True
        watchdog.start()
    try:
        return fn(inp)
    except MeasureTimeout:
        return inp.failure(msg)
    finally:
        with lock:
            state["running"] = False
            if not main and state["fired"]:  # not delivered yet: withdraw it
                ctypes.pythonapi.PyThreadState_SetAsyncExc(ident, None)
        if main:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)
        else:
            watchdog.cancel()
