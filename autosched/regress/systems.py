"""Model steps on a system of several devices, measured for the regression suite.

A :class:`~autosched.regress.cases.ModelCase` whose ``hw`` names a system (a preset or
file with several devices and their links, :mod:`sim.system`) is simulated the way
``autosched simulate`` does it: the partition search picks tensor- and pipeline-parallel
degrees, every device's program is compiled with each family's default schedules, and
the system's timing simulator times the step with its communication. Its gated figures
are the step's latency, energy and bound; the partition and the communication share are
information. Per-operator rows are not taken (an operator is split across devices).
"""

from __future__ import annotations

import statistics

from search_spaces.fusion import FULL_FUSION
from sim.errors import AutoschedError, InternalError
from sim.hwio import read_hardware_file
from sim.system import is_system_mapping

from .cases import ModelCase, resolve_model
from .results import CaseResult

__all__ = ["is_system", "system_result"]


def is_system(hw: str) -> bool:
    """Whether preset name or file ``hw`` describes several devices."""
    return is_system_mapping(read_hardware_file(hw)[1])


def system_result(case: ModelCase, repeats: int) -> CaseResult:
    """The figures of ``case`` on its system, simulated ``repeats`` times (the simulated
    figures must agree exactly; the wall time is their median)."""
    from autosched.compiler.system_figures import simulate_system_model

    if case.schedules != "default":
        raise AutoschedError(f"{case.id}: a system case takes the default schedules, not "
                             f"{case.schedules!r}")
    cfg = resolve_model(case.model)
    fusion = dict(FULL_FUSION) if case.fusion == "full" else {}
    runs = [simulate_system_model(cfg, case.hw, phase=case.phase, batch=case.batch,
                                  context=case.context, fusion=fusion)[0]
            for _ in range(repeats)]
    seen = {(f.latency_ns, f.energy_pj) for f in runs}
    if len(seen) != 1:
        raise InternalError(f"{case.id}: {len(seen)} different simulated results over "
                            f"{repeats} identical runs: {sorted(seen)}")
    f = runs[0]
    part = f.partition
    figures = {"latency_ns": f.latency_ns, "energy_pj": f.energy_pj, "bound_ns": f.bound_ns}
    info = {"tokens_per_s": f.tokens_per_s, "latency_over_bound": f.latency_ns / f.bound_ns,
            "comm_share": f.comm_share, "tp": float(part.get("tp", 1)),
            "pp": float(part.get("pp", 1))}
    wall = {"simulate_s": statistics.median(r.sim_wall_s for r in runs)}
    return CaseResult(case.id, "model", figures, (), wall, info)
