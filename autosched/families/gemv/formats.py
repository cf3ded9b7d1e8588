"""A GEMV's weight format: where its weights are dequantized and the device its layout
sees.

A gemv/gemm workload whose ``dtype`` names an integer format (``w8``, ``w4g128``,
``w4g64a``: :mod:`sim.formats`) is laid out one of two ways:

* ``bank``: the units take the format (``hw.formats``: the kind, and the group among
  ``group_sizes``; one scale per output row is always held). The banks store the packed
  codes; every layout decision is made on :func:`format_view`, the device whose rows
  and columns hold ``hw.density(kind)`` times as many weights and whose units have as
  many lanes, and the kernel's MACs and bank reads are marked with the format so the
  simulator times and computes them on the real device (column spacing and energy of
  the format, values the in-bank dequantizer delivers). Where they are dequantized is
  then the space's placement: ``pim``, in the bank before the lanes; ``host``, the host
  reads the packed rows (their bytes over the bus) and dequantizes as they arrive.
* ``load``: the units do not take it; the host dequantizes once, when the weights are
  placed, and the banks hold ``pim.dtype`` values (the format saves nothing on the
  device; reports say so).

Float formats (``fp16``, ``bf16``) are ``float``: the device as it is.
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

from search_spaces import Workload
from sim.formats import WeightFormat, weight_format
from sim.formats import dequant_site as site_of
from sim.hardware import Hardware
from sim.isa import Mac, RdBank
from sim.kernels import Kernel
from sim.program import Loop, Node

__all__ = ["dequant_site", "format_device", "format_of", "format_terms", "tag_format"]


def format_of(workload: Workload) -> WeightFormat:
    """The weight format ``workload.dtype`` names."""
    return weight_format(workload.dtype)


def dequant_site(workload: Workload, hw: Hardware) -> str:
    """``float``, ``bank`` or ``load`` (see the module docstring)."""
    return site_of(format_of(workload), hw)


@lru_cache(maxsize=64)
def format_view(hw: Hardware, kind: str) -> Hardware:
    """``hw`` as a layout of ``kind`` weights sees it: each row and column access holds
    ``density`` times the elements, and a unit has as many lanes; rows, banks, timings,
    global buffer and registers are the device's own."""
    d = hw.density(kind)
    org = replace(hw.org, row_bytes=hw.org.row_bytes * d, column_bytes=hw.org.column_bytes * d)
    return replace(hw, name=f"{hw.name}[{kind}]", org=org,
                   pim=replace(hw.pim, lanes=hw.pim.lanes * d))


def format_device(workload: Workload, hw: Hardware) -> Hardware:
    """The device the GEMV's layout decisions are made on: :func:`format_view` for a
    ``bank`` format, ``hw`` otherwise."""
    if dequant_site(workload, hw) != "bank":
        return hw
    return format_view(hw, format_of(workload).kind)


def format_terms(workload: Workload, hw: Hardware) -> dict[str, float]:
    """The bound's terms (``gemv_bound_terms``) on the device the layout sees, the host's
    weight reads at the packed codes' bytes (what its path moves over the bus)."""
    from .bound import gemv_bound_terms

    dev = format_device(workload, hw)
    t = gemv_bound_terms(workload, dev)
    if dev is hw:
        return t
    d = workload.dims
    codes = d["n"] * d["k"] * format_of(workload).bits / 8 / hw.external_bandwidth_gbps
    t = {**t, "host_weights": codes, "host": t["host"] - t["host_weights"] + codes}
    t["bound"] = min(t["pim"], t["host"])
    return t


def _tag(body: tuple[Node, ...], kind: str) -> tuple[Node, ...]:
    out: list[Node] = []
    for n in body:
        if isinstance(n, Loop):
            out.append(Loop(n.var, n.count, _tag(n.body, kind)))
        else:
            out.append(replace(n, fmt=kind) if isinstance(n, Mac | RdBank) else n)
    return tuple(out)


def tag_format(kernel: Kernel, kind: str) -> Kernel:
    """``kernel`` (lowered on :func:`format_view`) with every MAC and bank read over
    ``kind`` weights."""
    prog = kernel.program
    streams = tuple(replace(s, body=_tag(s.body, kind)) if s.engine == "pim" else s
                    for s in prog.streams)
    return replace(kernel, program=replace(prog, streams=streams,
                                           name=f"{prog.name}_{kind}"))
