"""One lowering per operator family: its space, its default, its bound, its code.

A :class:`Lowering` turns (workload, schedule point, hardware) into a
:class:`sim.kernels.Kernel` written as if it owned the device: weights from row 0 of
every bank, its own buffer and token names. The linker (``link.py``) places several of
them in one program. Kernel conventions every lowering follows:

* ``kernel.inputs`` lists host buffers the caller binds, activations first, in the order
  of the workload's documented inputs, then host constants (norm weights, rotary tables,
  biases) by the names the family documents;
* ``kernel.output`` is the result buffer (fp32, logical shape, no padding);
* ``kernel.place(mem, tensors)`` writes the family's weight tensors into the banks; for
  attention the KV cache region is reserved and persists between executions.

Implementations register themselves in :data:`LOWERINGS` keyed by workload family.
"""

from __future__ import annotations

import abc
from typing import ClassVar

from search_spaces import Schedule, Space, Workload
from search_spaces.errors import ScheduleError
from sim.errors import AutoschedError, InternalError, ProgramError
from sim.hardware import Hardware
from sim.kernels import Kernel
from sim.validate import validate

__all__ = ["LOWERINGS", "Lowering", "build", "lowering_for", "register"]


class Lowering(abc.ABC):
    """The contract of one operator family. Stateless; safe to share between threads."""

    families: ClassVar[tuple[str, ...]]

    @abc.abstractmethod
    def space(self, workload: Workload, hw: Hardware) -> Space:
        """The schedule space of ``workload`` on ``hw`` (hardware limits as constraints)."""

    @abc.abstractmethod
    def default(self, workload: Workload, hw: Hardware) -> dict:
        """What a competent engineer would write by hand; always a valid point."""

    @abc.abstractmethod
    def lower(self, workload: Workload, point: dict, hw: Hardware) -> Kernel:
        """The program of one valid point (callers validate first; see :func:`build`)."""

    @abc.abstractmethod
    def bound(self, workload: Workload, hw: Hardware) -> float:
        """Lower bound in ns over every schedule of the space (for tuned/bound ratios)."""

    def tensors(self, workload: Workload) -> tuple[str, ...]:
        """Names of the weight tensors ``place`` expects (none by default)."""
        return ()


LOWERINGS: dict[str, Lowering] = {}


def register(lowering: Lowering) -> Lowering:
    """Add ``lowering`` for each of its families."""
    for fam in lowering.families:
        LOWERINGS[fam] = lowering
    return lowering


def lowering_for(workload: Workload) -> Lowering:
    """The lowering of ``workload``'s family."""
    from . import families  # noqa: F401  (registers the built-in lowerings)

    low = LOWERINGS.get(workload.op)
    if low is None:
        raise AutoschedError(f"no code generator for operator family {workload.op!r} "
                             f"(have: {', '.join(sorted(LOWERINGS))})")
    return low


def build(workload: Workload, schedule: Schedule | dict | None, hw: Hardware) -> Kernel:
    """Validate ``schedule`` against the family's space, lower it, validate the program.

    ``None`` means the default schedule. A point outside the space raises
    :class:`ScheduleError` listing every reason, before any code is generated. A program
    the instruction set rejects is a bug of the lowering, raised as :class:`InternalError`
    naming the family, the workload and the schedule.
    """
    low = lowering_for(workload)
    space = low.space(workload, hw)
    if schedule is None:
        point = low.default(workload, hw)
    elif isinstance(schedule, Schedule):
        if schedule.space != space.name or schedule.version != space.version:
            raise ScheduleError(f"schedule is for space {schedule.space} v{schedule.version}, "
                                f"{workload.key} needs {space.name} v{space.version}")
        point = schedule.point
    else:
        point = dict(schedule)
    space.check(point)
    kernel = low.lower(workload, point, hw)
    try:
        validate(kernel.program, hw)
    except ProgramError as e:
        key = Schedule.of(space, point).key
        raise InternalError(f"internal compiler error: the {workload.op} lowering of "
                            f"{workload.key} with schedule {key} on {hw.name} produced an "
                            f"invalid program: {e}") from e
    return kernel
