"""The operator families the compiler knows, listed once, and ``build``.

Adding a family is its folders (``autosched/families/<name>/`` and its space under
``search_spaces/``) and one line in :data:`REGISTRY`; see ``docs/adding-an-operator.md``.
Everything else finds it here, by the op of a workload.
"""

from __future__ import annotations

import functools

from search_spaces import Schedule, Space, Workload
from search_spaces.errors import ScheduleError
from sim.errors import AutoschedError, InternalError, ProgramError
from sim.hardware import Hardware
from sim.kernels import Kernel
from sim.validate import validate

from .attention import AttentionFamily
from .base import Family
from .gemv import GemvFamily
from .layernorm import LayerNormFamily
from .moe import MoeFamily
from .pointwise import POINTWISE

__all__ = ["FAMILIES", "REGISTRY", "build", "families", "family_of", "host_ops", "space_of"]

# the families, one line each (stateless objects, shared)
REGISTRY: tuple[Family, ...] = (
    GemvFamily(),
    AttentionFamily(),
    LayerNormFamily(),
    MoeFamily(),
    *POINTWISE,
)

# op -> family; tests may swap an entry (monkeypatch.setitem)
FAMILIES: dict[str, Family] = {op: fam for fam in REGISTRY for op in fam.ops}


def families() -> tuple[Family, ...]:
    """Every distinct family object, in registry order (entries swapped in included)."""
    return tuple(dict.fromkeys(FAMILIES.values()))


def family_of(workload: Workload | str) -> Family:
    """The family owning ``workload`` (or an op name)."""
    op = workload if isinstance(workload, str) else workload.op
    fam = FAMILIES.get(op)
    if fam is None:
        raise AutoschedError(f"no operator family {op!r} (have: {', '.join(sorted(FAMILIES))})")
    return fam


def space_of(workload: Workload, hw: Hardware) -> Space:
    """The schedule space of ``workload`` on ``hw`` from its family, built once
    per (family, workload, hardware): spaces are immutable and some take a millisecond
    to build, which a lookup per compiled operator would pay every time."""
    return _space(family_of(workload), workload, hw)


@functools.lru_cache(maxsize=4096)
def _space(low: Family, workload: Workload, hw: Hardware) -> Space:
    return low.space(workload, hw)


def build(workload: Workload, schedule: Schedule | dict | None, hw: Hardware) -> Kernel:
    """Validate ``schedule`` against the family's space, lower it, validate the program.

    ``None`` means the default schedule. A point outside the space raises
    :class:`ScheduleError` listing every reason, before any code is generated. A program
    the instruction set rejects is a bug of the lowering, raised as :class:`InternalError`
    naming the family, the workload and the schedule.
    """
    low = family_of(workload)
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


def host_ops(graph) -> dict[str, tuple[str, ...]]:
    """The ops of the model no family covers (run on the host as the model computes them):
    each op's key (ATen name and digest) and the nodes that run it, in graph order."""
    out: dict[str, tuple[str, ...]] = {}
    for n in graph:
        key = family_of(n.workload).unclaimed_op(n.workload)
        if key is not None:
            out[key] = (*out.get(key, ()), n.name)
    return out
