"""The Dask runner: measurements on a Dask distributed cluster (a farm of simulator workers).

Start a scheduler (``dask scheduler``) and workers on machines that have autosched
installed (``dask worker tcp://host:8786``), then ``autosched tune --runner
dask://host:8786``. Each measurement is one Dask task running :func:`measure_one` (or
the runner's ``measure``) under the runner's time limit. A worker that dies mid-task has
its measurement rescheduled on another worker by the scheduler; a measurement that has
killed ``crash_limit`` workers is recorded as a failure and not tried again. When it
connects, the runner sets the scheduler's ``allowed_failures`` to ``crash_limit - 1`` and
its worker saturation to 1 (a worker holds only the task it runs, so a crash counts
against that measurement alone).
Losing the scheduler stops the run with one line (everything committed stays).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from concurrent.futures import CancelledError

from autosched.measure.record import Measurement
from sim.errors import AutoschedError

from .base import MeasureInput, Runner, measure_one
from .deadline import MEASURE_TIMEOUT_S, within

__all__ = ["DaskRunner", "RunnerError", "RunnerLost"]

_POLL_S = 0.5  # how often a waiting run checks that the scheduler is still there


class RunnerError(AutoschedError):
    """A measurement back end cannot be used: bad address, missing package."""


class RunnerLost(RunnerError):
    """The back end went away during a run (exit status 1: nothing was wrong with the input)."""

    exit_code = 1


def _farm_settings(allowed_failures: int, dask_scheduler=None) -> None:
    """Run on the scheduler: how many worker deaths a task survives before it is given up,
    and one task per worker thread (queued tasks wait at the scheduler), so a worker's
    death counts against the measurement it was running and no other."""
    dask_scheduler.allowed_failures = allowed_failures
    dask_scheduler.WORKER_SATURATION = 1.0


class DaskRunner(Runner):
    """Measures on the Dask cluster whose scheduler listens at ``address`` (``tcp://h:p``)."""

    def __init__(self, address: str, *, measure: Callable[[MeasureInput], Measurement]
                 = measure_one, timeout: float | None = MEASURE_TIMEOUT_S,
                 crash_limit: int = 2, connect_timeout: float = 10.0) -> None:
        try:
            from distributed import Client
        except ImportError:
            raise RunnerError("a Dask runner needs the distributed package: "
                              "pip install 'autosched[dask]'") from None
        if type(crash_limit) is not int or crash_limit < 1:
            raise RunnerError(f"crash_limit must be an int >= 1, got {crash_limit!r}")
        self.address, self.crash_limit = address, crash_limit
        self._one = functools.partial(within, measure, timeout=timeout)
        try:
            self.client = Client(address, timeout=connect_timeout, set_as_default=False)
        except (OSError, TimeoutError) as e:
            raise RunnerError(f"cannot reach the Dask scheduler at {address} ({e}); start "
                              "it with `dask scheduler` or check --runner") from None
        self.client.run_on_scheduler(_farm_settings, crash_limit - 1)
        self._closed = False

    @property
    def workers(self) -> int:
        """Worker threads the cluster has right now."""
        return sum(w.get("nthreads", 1) for w in
                   self.client.scheduler_info()["workers"].values())

    def run(self, inputs: Sequence[MeasureInput]) -> list[Measurement]:
        from distributed import KilledWorker

        if self._closed:
            raise AutoschedError("this DaskRunner is closed; create a new one")
        if not inputs:
            return []
        futures = self.client.map(self._one, list(inputs), pure=False)
        out: list[Measurement] = []
        try:
            for fut, inp in zip(futures, inputs, strict=True):
                try:
                    out.append(self._result(fut))
                except KilledWorker:
                    out.append(inp.failure(f"the measurement killed {self.crash_limit} Dask "
                                           "workers; not retried"))
                except (CancelledError, OSError) as e:
                    raise RunnerLost(f"lost the Dask scheduler at {self.address} while "
                                     f"measuring {inp.workload.key}; committed measurements "
                                     "are kept: rerun to resume") from e
                except Exception as e:
                    e.add_note(f"while measuring {inp.describe()}")
                    raise
        finally:
            pending = [f for f in futures if not f.done()]
            if pending:
                try:
                    self.client.cancel(pending)
                except (OSError, TimeoutError, CancelledError):
                    pass  # the scheduler is gone and its tasks with it
        return out

    def _result(self, fut):
        """``fut.result()``, noticing within a second that the scheduler is gone."""
        while True:
            try:
                return fut.result(timeout=_POLL_S)
            except TimeoutError:
                if self.client.status != "running":  # reconnecting: the scheduler is gone
                    raise OSError(f"client {self.client.status}") from None

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            try:
                self.client.close(timeout=5)
            except (OSError, TimeoutError):
                pass
