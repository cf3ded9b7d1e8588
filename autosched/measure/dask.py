"""The Dask runner: measurements on a Dask distributed cluster (a farm of simulator workers).

Start a scheduler (``dask scheduler``) and workers on machines that have autosched
installed (``dask worker tcp://host:8786``), then ``autosched tune --runner
dask://host:8786``. Each measurement is one Dask task running :func:`measure_one` (or
the runner's ``measure``) under the runner's time limit, placed by this job
(:mod:`.farm_job`): a worker that dies mid-task has its measurement placed again on
another worker, and a measurement that has killed ``crash_limit`` workers is recorded as
a failure and not tried again. The scheduler's own settings are never changed, so jobs
sharing a farm do not change each other's rules.

A farm that is not this machine's should speak TLS: ``security`` (a distributed
``Security`` with the CA, this client's certificate and key; :func:`.spec.farm_security`
builds it from ``--tls-*`` or distributed's own configuration) makes the client verify the
scheduler and prove itself, and refuses a scheduler without TLS.
Losing the scheduler stops the run with one line (everything committed stays).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

from autosched.measure.record import Measurement
from sim.errors import AutoschedError

from .base import MeasureInput, Runner, measure_one
from .deadline import MEASURE_TIMEOUT_S, within
from .farm_job import FarmJob, SchedulerGone

__all__ = ["DaskRunner", "RunnerError", "RunnerLost"]


class RunnerError(AutoschedError):
    """A measurement back end cannot be used: bad address, missing package."""


class RunnerLost(RunnerError):
    """The back end went away during a run (exit status 1: nothing was wrong with the input)."""

    exit_code = 1


class DaskRunner(Runner):
    """Measures on the Dask cluster whose scheduler listens at ``address`` (``tcp://h:p``,
    or ``tls://h:p`` with ``security``)."""

    def __init__(self, address: str, *, measure: Callable[[MeasureInput], Measurement]
                 = measure_one, timeout: float | None = MEASURE_TIMEOUT_S,
                 crash_limit: int = 2, connect_timeout: float = 10.0,
                 security: object | None = None) -> None:
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
            self.client = Client(address, timeout=connect_timeout, set_as_default=False,
                                 security=security)
        except (OSError, TimeoutError) as e:
            hint = "" if address.startswith("tls://") else \
                " (a farm that speaks TLS needs tls://HOST:PORT and --tls-* files)"
            raise RunnerError(f"cannot reach the Dask scheduler at {address} ({e}){hint}; "
                              "start it with `dask scheduler` or check --runner") from None
        self._closed = False

    @property
    def workers(self) -> int:
        """Worker threads the cluster has right now."""
        return sum(w.get("nthreads", 1) for w in
                   self.client.scheduler_info()["workers"].values())

    def run(self, inputs: Sequence[MeasureInput]) -> list[Measurement]:
        if self._closed:
            raise AutoschedError("this DaskRunner is closed; create a new one")
        if not inputs:
            return []
        try:
            return FarmJob(self.client, self._one, inputs, self.crash_limit).run()
        except SchedulerGone as e:
            raise RunnerLost(f"lost the Dask scheduler at {self.address} while measuring "
                             f"{e.input.workload.key}; committed measurements are kept: "
                             "rerun to resume") from None

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            try:
                self.client.close(timeout=5)
            except (OSError, TimeoutError):
                pass
