"""One measurement of one schedule, and the interface every measurement back end implements."""

from __future__ import annotations

import abc
from collections.abc import Sequence
from dataclasses import dataclass, field

from autosched.measure.record import Measurement
from search_spaces import Schedule, Workload
from sim import SIM_VERSION
from sim.errors import AutoschedError
from sim.hardware import Hardware
from sim.program import Program
from sim.timing import simulate

from ..families import build, family_of

__all__ = ["MeasureInput", "Runner", "measure_one"]


@dataclass(frozen=True)
class MeasureInput:
    """What to measure: one schedule of one workload on one hardware. Picklable.

    ``program`` is the schedule's lowered program when the caller already built it (the
    search lowers candidates to rank them), so a candidate is lowered once; None means
    :func:`measure_one` lowers it.
    """

    workload: Workload
    schedule: Schedule
    hw: Hardware
    program: Program | None = field(default=None, compare=False, repr=False)

    def describe(self) -> str:
        """``workload key / schedule key on hw name``, for error messages."""
        return f"{self.workload.key} / {self.schedule.key} on {self.hw.name}"

    def failure(self, error: str) -> Measurement:
        """The failure record of this input (the measurement could not be made)."""
        return Measurement.failed(self.workload, self.schedule, self.hw.fingerprint,
                                  self.hw.name, SIM_VERSION, error)


def measure_one(inp: MeasureInput) -> Measurement:
    """Build, simulate and bound ``inp``; any :class:`AutoschedError` becomes a failure record.

    Only the project's error base is caught: an invalid point, a code generator that
    rejects the shape or a program the simulator refuses are data; anything else is a
    bug and propagates.
    """
    w, hw = inp.workload, inp.hw
    try:
        bound_ns = family_of(w).bound(w, hw)
        program = inp.program if inp.program is not None else build(w, inp.schedule, hw).program
        res = simulate(program, hw)
    except AutoschedError as e:
        return inp.failure(str(e))
    return Measurement(w, inp.schedule, hw.fingerprint, hw.name, SIM_VERSION,
                       res.latency_ns, res.energy_pj, bound_ns)


class Runner(abc.ABC):
    """Measures batches of schedules: the one seam between the search and a measurement back end.

    Contract for every implementation (the local simulator pool today; an FPGA prototype,
    a farm of simulator workers or silicon later):

    * ``run(inputs)`` returns exactly one :class:`Measurement` per input, in input order;
    * a candidate that cannot be built or run is a *record* (``Measurement.failed`` with
      the reason), never an exception, so the search goes on and never retries it; so is
      one that runs longer than the runner's ``timeout`` and, where workers can die, one
      that kills its worker more than once;
    * an unexpected error (a bug, a lost cluster) raises, naming the input it concerned;
    * ``run`` is deterministic in the values it returns (latency, energy, bound) for a
      given input, whatever the parallelism; it does not write to any database (the
      caller commits each record);
    * a runner may hold workers between calls; ``close()`` releases them (idempotent) and
      runners are context managers. One runner is driven by one thread at a time;
    * workers ignore SIGINT: Ctrl-C reaches the driving process only, which stops cleanly.

    :mod:`autosched.measure.contract` checks this contract for every implementation.
    """

    @abc.abstractmethod
    def run(self, inputs: Sequence[MeasureInput]) -> list[Measurement]:
        """One measurement per input, same order, failures included."""

    def close(self) -> None:  # noqa: B027 (optional hook: nothing to release by default)
        """Release workers; the runner may not be used afterwards."""

    def __enter__(self) -> Runner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
