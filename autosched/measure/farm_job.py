"""One batch of measurements on a Dask cluster, placed and accounted for by this job alone.

The scheduler's own settings (``allowed_failures``, worker saturation) are never changed:
a farm may serve several jobs. Instead the job places its tasks itself, at most one per
free worker thread, each restricted to its worker (``workers=[address]``,
``allow_other_workers=False``), so the scheduler never moves it elsewhere. When a worker
leaves the cluster while it holds a task of this job, that death counts against that
measurement alone: the task is withdrawn and placed again on another worker, and a
measurement that has killed ``crash_limit`` workers is recorded as a failure and not
tried again. A scheduler configured to give up sooner (``KilledWorker``) counts as a
death too.
"""

from __future__ import annotations

import threading
import uuid
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import CancelledError

from autosched.measure.record import Measurement

from .base import MeasureInput

__all__ = ["POLL_S", "FarmJob", "SchedulerGone"]

POLL_S = 0.5  # how often a waiting job looks at the cluster's workers and its scheduler


class SchedulerGone(Exception):
    """The scheduler stopped answering while ``input`` was being measured."""

    def __init__(self, inp: MeasureInput) -> None:
        super().__init__(inp.workload.key)
        self.input = inp


class FarmJob:
    """Measures ``inputs`` with ``one`` on ``client``'s cluster (see the module docstring)."""

    def __init__(self, client, one: Callable[[MeasureInput], Measurement],
                 inputs: Sequence[MeasureInput], crash_limit: int) -> None:
        self.client, self.one, self.inputs = client, one, list(inputs)
        self.crash_limit = crash_limit
        self.out: list[Measurement | None] = [None] * len(self.inputs)
        self.crashes = [0] * len(self.inputs)
        self.todo = deque(range(len(self.inputs)))
        self.running: dict = {}  # future -> (input index, worker address, worker id)
        self.tag = uuid.uuid4().hex[:12]
        self.ended = threading.Event()  # set when any task of this job finishes

    def run(self) -> list[Measurement]:
        try:
            while self.todo or self.running:
                workers = self._workers()
                self._withdraw_lost(workers)
                self._place(workers)
                self._collect()
        finally:
            pending = [f for f in self.running if not f.done()]
            if pending:
                try:
                    self.client.cancel(pending)
                except (OSError, TimeoutError, CancelledError):
                    pass  # the scheduler is gone and its tasks with it
        return [m for m in self.out if m is not None]

    def _workers(self) -> dict[str, tuple[str, int]]:
        """Address -> (id, threads) of the workers the scheduler has now."""
        if self.client.status != "running":
            raise SchedulerGone(self._current())
        try:
            info = self.client.scheduler_info()["workers"]
        except (OSError, TimeoutError, CancelledError):
            raise SchedulerGone(self._current()) from None
        return {a: (str(w.get("id", a)), int(w.get("nthreads", 1))) for a, w in info.items()}

    def _current(self) -> MeasureInput:
        busy = [i for i, _, _ in self.running.values()] or list(self.todo) or [0]
        return self.inputs[min(busy)]

    def _crash(self, i: int) -> None:
        """One more worker died holding measurement ``i``: place it again, or give up."""
        self.crashes[i] += 1
        if self.crashes[i] >= self.crash_limit:
            self.out[i] = self.inputs[i].failure(
                f"the measurement killed {self.crash_limit} Dask workers; not retried")
        else:
            self.todo.appendleft(i)

    def _withdraw_lost(self, workers: dict[str, tuple[str, int]]) -> None:
        for fut, (i, addr, wid) in list(self.running.items()):
            if not fut.done() and workers.get(addr, ("", 0))[0] != wid:
                del self.running[fut]
                self.client.cancel([fut])
                self._crash(i)

    def _place(self, workers: dict[str, tuple[str, int]]) -> None:
        held: dict[str, int] = {}
        for _, addr, _ in self.running.values():
            held[addr] = held.get(addr, 0) + 1
        free = sorted(((n - held.get(a, 0), a) for a, (_, n) in workers.items()), reverse=True)
        for slots, addr in free:
            for _ in range(max(0, slots)):
                if not self.todo:
                    return
                i = self.todo.popleft()
                fut = self.client.submit(self.one, self.inputs[i], pure=False,
                                         key=f"autosched-measure-{self.tag}-{i}-"
                                             f"{self.crashes[i]}",
                                         workers=[addr], allow_other_workers=False)
                fut.add_done_callback(lambda _: self.ended.set())
                self.running[fut] = (i, addr, workers[addr][0])

    def _collect(self) -> None:
        from distributed import KilledWorker

        if not self.running:
            self.ended.wait(POLL_S)  # no worker free: look again soon
            return
        if not any(f.done() for f in self.running):
            self.ended.wait(POLL_S)
        self.ended.clear()
        for fut in [f for f in self.running if f.done()]:
            i, _, _ = self.running.pop(fut)
            try:
                self.out[i] = fut.result()
            except KilledWorker:
                self._crash(i)
            except (CancelledError, OSError):
                raise SchedulerGone(self.inputs[i]) from None
            except Exception as e:
                e.add_note(f"while measuring {self.inputs[i].describe()}")
                raise
