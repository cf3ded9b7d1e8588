"""The operator families the code generator knows, listed once, and ``build``.

Adding a family is one line here (its lowering, from its folder under ``families/``)
plus its space under ``search_spaces/``; see ``docs/adding-an-operator.md``.
"""

from __future__ import annotations

import functools

from search_spaces import Schedule, Space, Workload
from search_spaces.errors import ScheduleError
from search_spaces.pointwise import POINTWISE_FAMILIES
from sim.errors import AutoschedError, InternalError, ProgramError
from sim.hardware import Hardware
from sim.kernels import Kernel
from sim.validate import validate

from .families.attention import AttentionLowering
from .families.gemv import GemvLowering
from .families.layernorm import LayerNormLowering
from .families.pointwise import PointwiseLowering
from .lowering import Lowering

__all__ = ["LOWERINGS", "build", "lowering_for", "space_of"]

_GEMV, _POINTWISE = GemvLowering(), PointwiseLowering()

# family -> lowering (stateless, shared); tests may swap an entry (monkeypatch.setitem)
LOWERINGS: dict[str, Lowering] = {
    "gemv": _GEMV,
    "gemm": _GEMV,
    "attention": AttentionLowering(),
    "layernorm": LayerNormLowering(),
    **dict.fromkeys(POINTWISE_FAMILIES, _POINTWISE),
}


def lowering_for(workload: Workload) -> Lowering:
    """The lowering of ``workload``'s family."""
    low = LOWERINGS.get(workload.op)
    if low is None:
        raise AutoschedError(f"no code generator for operator family {workload.op!r} "
                             f"(have: {', '.join(sorted(LOWERINGS))})")
    return low


def space_of(workload: Workload, hw: Hardware) -> Space:
    """The schedule space of ``workload`` on ``hw`` from its family's lowering, built once
    per (lowering, workload, hardware): spaces are immutable and some take a millisecond
    to build, which a lookup per compiled operator would pay every time."""
    return _space(lowering_for(workload), workload, hw)


@functools.lru_cache(maxsize=4096)
def _space(low: Lowering, workload: Workload, hw: Hardware) -> Space:
    return low.space(workload, hw)


def build(workload: Workload, schedule: Schedule | dict | None, hw: Hardware) -> Kernel:
    """Validate ``schedule`` against the family's space, lower it, validate the program.

    ``None`` means the default schedule. A point outside the space raises
    :class:`ScheduleError` listing every reason, before any code is generated. A program
    the instruction set rejects is a bug of the lowering, raised as :class:`InternalError`
    naming the family, the workload and the schedule.
    """
    low = lowering_for(workload)
    space = space_of(workload, hw)
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
