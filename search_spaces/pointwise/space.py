"""Spaces of the small families: rmsnorm, rope, elementwise, embedding, argmax, extern.

Each space has one parameter, ``placement``. The host runs every family as one host op
over all rows: the host's cost is a fixed dispatch overhead plus a roofline on a few
kilobytes, so splitting an op into chunks only adds dispatches and overlaps with nothing;
no such parameter is offered. Element-wise ``add`` and ``mul``, and any activation the
device lists in ``hw.pim.activation_functions``, may also run in the banks
(``sim.kernels.elementwise``): operands go host -> banks -> host over the channel bus, so
PIM rarely wins, and the search finds that out. ``pim`` is left out of the domain when the
device cannot run the op in-bank or the operands do not fit in the banks' rows; the
reason is available from :func:`pim_unavailable`.
"""

from __future__ import annotations

from search_spaces.domains import Categorical
from search_spaces.errors import SpaceError
from search_spaces.params import Param
from search_spaces.space import Space
from search_spaces.workload import Workload
from sim.hardware import Hardware

__all__ = ["ACTIVATION_FNS", "DEFAULT_EPS", "ELEMENTWISE_FNS", "GATED_FNS", "PIM_ACTIVATION",
           "PIM_BINARY_FNS", "POINTWISE_FAMILIES", "VERSION",
           "pim_unavailable", "pointwise_default", "pointwise_library", "pointwise_space"]

VERSION = 1
DEFAULT_EPS = 1e-5  # RMSNorm eps of a workload without an ``eps`` attr (Llama's value)
POINTWISE_FAMILIES = ("rmsnorm", "rope", "elementwise", "embedding", "argmax", "extern")
ACTIVATION_FNS = ("silu", "relu", "gelu_tanh", "gelu_erf")
GATED_FNS = tuple(f"{a}_mul" for a in ACTIVATION_FNS)  # act(a) * b
ELEMENTWISE_FNS = ("add", "mul", *ACTIVATION_FNS, *GATED_FNS, "scale", "softcap")
PIM_BINARY_FNS = ("add", "mul")
# an element-wise fn -> the in-bank activation computing it (tanh-GELU is the units' GELU)
PIM_ACTIVATION = {"gelu_tanh": "gelu", "relu": "relu", "silu": "silu"}


def _check(workload: Workload) -> None:
    if workload.op not in POINTWISE_FAMILIES:
        raise SpaceError(f"{workload.key} is not a point-wise family "
                         f"({', '.join(POINTWISE_FAMILIES)})")
    if workload.op == "elementwise" and workload.attr("fn") not in ELEMENTWISE_FNS:
        raise SpaceError(f"{workload.key}: elementwise needs attr fn in "
                         f"{', '.join(ELEMENTWISE_FNS)}, got {workload.attr('fn')!r}")
    if workload.op == "embedding" and workload.attr("epilogue", "") not in (
            "", "rmsnorm", "layernorm"):
        raise SpaceError(f"{workload.key}: an embedding's epilogue is rmsnorm, layernorm or "
                         f"none, got {workload.attr('epilogue')!r}")
    if workload.op == "rope" and workload.dims["d"] % 2:
        raise SpaceError(f"{workload.key}: rotate-half rope needs an even head dim d")


def pim_unavailable(workload: Workload, hw: Hardware) -> str | None:
    """Why ``workload`` cannot run in the banks of ``hw``; ``None`` when it can."""
    _check(workload)
    if workload.op != "elementwise":
        return f"{workload.op} runs on the host only (no in-bank kernel for it)"
    fn = workload.attr("fn")
    if fn not in PIM_BINARY_FNS and PIM_ACTIVATION.get(fn) not in hw.pim.activation_functions:
        return (f"{hw.name} computes no {fn!r} in the banks (in-bank: "
                f"{', '.join((*PIM_BINARY_FNS, *hw.pim.activation_functions))})")
    if not hw.pim.elementwise or hw.pim.register_lanes != hw.pim.lanes:
        return f"{hw.name} has no in-bank element-wise unit with register_lanes == lanes"
    cols = hw.columns_per_row // 2 if fn in PIM_BINARY_FNS else hw.columns_per_row
    per_pass = hw.org.channels * hw.org.banks_per_channel * cols * hw.pim.lanes
    d = workload.dims
    rows = -(-(d["m"] * d["n"]) // per_pass)
    if rows > hw.org.rows_per_bank:
        return (f"{d['m'] * d['n']} elements need {rows} rows per bank, "
                f"{hw.name} has {hw.org.rows_per_bank}")
    return None


def pointwise_space(workload: Workload, hw: Hardware) -> Space:
    """The placement space of ``workload`` on ``hw``: ``host``, plus ``pim`` where possible."""
    _check(workload)
    places = ("host",) if pim_unavailable(workload, hw) else ("host", "pim")
    return Space(workload.op, VERSION, (Param("placement", Categorical(places)),))


def pointwise_default(workload: Workload, hw: Hardware) -> dict:
    """Host placement: one host op, no bus round trip (what one writes by hand)."""
    _check(workload)
    return {"placement": "host"}


def pointwise_library(workload: Workload, hw: Hardware) -> dict | None:
    """The library's in-bank element-wise kernel (``sim.kernels.elementwise``) as a point:
    ``pim`` placement where the device runs the op in its banks, else None (the library
    has no kernel for the other families)."""
    return {"placement": "pim"} if pim_unavailable(workload, hw) is None else None
