"""The mixture-of-experts space: where a routed MLP's experts run and how rows reach them.

Workload ``moe`` (dims ``m`` rows, ``n`` hidden, ``i`` one expert's intermediate width,
``e`` experts, ``k`` experts per row, ``s`` the shared expert's intermediate width, 1
when there is none; attrs ``act`` the experts' activation, ``norm`` 1 when the top-k
weights are renormalised to sum to one, ``shared`` 1 with a sigmoid-gated shared
expert, ``route`` the layer's expert probabilities ``/``-separated, ``uniform`` by default).

Every expert's weights stay in the banks; the host computes the routing from the router
GEMV and dispatches the chosen experts (``sim.program.Dispatch``), each a GEMM over the
rows routed to it, ``tile`` rows per dispatched trip; ``placement=host`` has the host
multiply instead, reading the weights from the banks. ``split`` places the experts:
``all`` runs each expert over every channel, one after the other; ``groups`` gives each
of ``groups`` channel groups its own experts, so experts chosen together run side by
side on disjoint channels. With the experts split over ``ep`` devices (attr ``ep``),
``replicas`` copies that many of the most probable experts onto every device, each
running its share of their rows, so that a hot expert's rows no longer queue on the one
device that owns it (the copies take memory: a point that does not fit is refused
when the step is planned).
"""

from __future__ import annotations

from search_spaces.constraints import Constraint
from search_spaces.domains import Categorical, PowersOfTwo
from search_spaces.errors import SpaceError
from search_spaces.expr import Var
from search_spaces.params import Cond, Param
from search_spaces.space import Space
from search_spaces.workload import Workload
from sim.hardware import Hardware

__all__ = ["DIMS", "MOE_VERSION", "moe_default", "moe_space"]

DIMS = {"moe": ("m", "n", "i", "e", "k", "s")}
MOE_VERSION = 3
REPLICAS = (1, 2, 4, 8)


def _check(workload: Workload) -> None:
    if workload.op != "moe":
        raise SpaceError(f"the moe space takes moe workloads, not {workload.key}")
    d = workload.dims
    if not 1 <= d["k"] <= d["e"]:
        raise SpaceError(f"{workload.key}: k={d['k']} experts per row out of 1..e={d['e']}")


def _groups(workload: Workload, hw: Hardware) -> tuple[int, ...]:
    """Channel-group counts that split the channels and the device's experts evenly."""
    local = workload.dims["e"] // int(workload.attr("ep", 1))  # this device's experts
    return tuple(g for g in (2, 4, 8, 16, 32, 64)
                 if local % g == 0 and hw.org.channels % g == 0)


def moe_space(workload: Workload, hw: Hardware) -> Space:
    """The dispatch space of ``workload`` on ``hw`` (see the module docstring)."""
    _check(workload)
    m, e = workload.dims["m"], workload.dims["e"]
    ep = int(workload.attr("ep", 1))
    groups = _groups(workload, hw)
    params = [Param("placement", Categorical(("pim", "host"))),
              Param("tile", PowersOfTwo(1, 1 << (m - 1).bit_length())),
              Param("split", Categorical(("all", "groups") if groups else ("all",)))]
    rules = []
    if groups:
        params.append(Param("groups", Categorical(groups), Cond("split", "groups")))
    replicas = tuple(r for r in REPLICAS if r <= e // 2) if ep > 1 else ()
    if replicas:
        params.append(Param("replicas", Categorical((0, *replicas))))
        if groups:  # the channel groups share a device's slots evenly
            rules.append(Constraint("replica_groups", (e // ep + Var("replicas")) % Var(
                "groups"), "==", 0, "{expr}={lhs}: the expert slots do not split evenly "
                "over {groups} channel groups"))
    d = workload.dims
    macs = d["m"] * (d["k"] * 3 * d["i"] * d["n"] + d["n"] * (d["e"] + 3 * d["s"]))
    return Space("moe", MOE_VERSION, tuple(params), tuple(rules), macs=float(macs))


def moe_default(workload: Workload, hw: Hardware) -> dict:
    """Each expert over all channels, a trip of as many rows as an expert receives on
    average (``m * k / e``, rounded up to a power of two), no replicas."""
    _check(workload)
    d = workload.dims
    rows = -(-d["m"] * d["k"] // d["e"])
    out = {"placement": "pim", "tile": 1 << (rows - 1).bit_length(), "split": "all"}
    if int(workload.attr("ep", 1)) > 1 and d["e"] >= 2:
        out["replicas"] = 0  # no copies: each device keeps only its own experts
    return out
