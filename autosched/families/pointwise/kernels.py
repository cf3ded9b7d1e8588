"""Kernels of the point-wise families (rmsnorm, rope, elementwise, embedding, argmax and
host; space: search_spaces.pointwise).

``host`` placement is one host op over all rows (:func:`one_host_op`, each family
choosing its op and buffers) on fp32 host buffers of the logical shapes (no padding, no
PIM stream). ``pim`` (element-wise only) wraps ``sim.kernels.elementwise``
over the ``m * n`` flattened elements with its buffers renamed to the family convention
(``a``, ``b`` -> ``y``). For ``m == 1`` the operands are zero-padded to the kernel's
buffers (``padded_shapes``); for ``m > 1`` the host first copies them into staging buffers
of the bank dtype and signals ``start``, which the PIM stream waits for.
"""

from __future__ import annotations

import numpy as np

from autosched.codegen.rewrite import Rewrite, rewrite_body
from search_spaces import Workload
from search_spaces.pointwise import GATED_FNS, PIM_ACTIVATION, PIM_BINARY_FNS
from sim.hardware import Hardware
from sim.isa import BufRef, HostOp, Signal, Wait, aff
from sim.kernels import Kernel, elementwise
from sim.program import Buffer, Program, Stream

__all__ = ["binary", "fn_attrs", "one_host_op", "pim_kernel", "shapes_of"]

Shape = tuple[int, ...]


def binary(workload: Workload) -> bool:
    """Whether an elementwise workload reads two operands (``a`` and ``b``)."""
    return workload.attr("fn") in ("add", "mul", *GATED_FNS)


def fn_attrs(workload: Workload) -> tuple:
    """The host op attrs of an elementwise fn's constants (``scale``: ``alpha``,
    ``softcap``: ``cap``)."""
    key = {"scale": "alpha", "softcap": "cap"}.get(str(workload.attr("fn")))
    return ((key, float(workload.attr(key))),) if key else ()


def _place_nothing(mem: object, tensors: dict[str, np.ndarray]) -> None:
    """Point-wise kernels keep nothing in the banks: constants are host buffers."""


def one_host_op(name: str, kind: str, ins: list[tuple[str, Shape, Shape]], out: Shape,
                 attrs: tuple = (), dtypes: dict[str, str] | None = None) -> Kernel:
    """One host op ``y = kind(ins)``; each input is (buffer, logical shape, shape the op sees);
    ``dtypes``: inputs not held in fp32."""
    refs = tuple(BufRef(b, aff(0), seen) for b, _, seen in ins)
    op = HostOp(kind, (BufRef("y", aff(0), out),), refs, attrs)
    bufs = [Buffer(b, (dtypes or {}).get(b, "fp32"), int(np.prod(s))) for b, s, _ in ins]
    bufs.append(Buffer("y", "fp32", int(np.prod(out))))
    prog = Program((Stream("host", "host", (), (op,)),), tuple(bufs), name=name)
    shapes = tuple(s for _, s, _ in ins)
    return Kernel(prog, tuple(b for b, _, _ in ins), "y", out, _place_nothing,
                  input_shapes=shapes, padded_shapes=shapes)


def shapes_of(spec: object) -> list[Shape]:
    """``"2x3,4"`` -> [(2, 3), (4,)]."""
    return [tuple(int(v) for v in s.split("x")) for s in str(spec).split(",") if s]


def pim_kernel(wl: Workload, hw: Hardware) -> Kernel:
    """The in-bank element-wise kernel under the family's buffer names."""
    m, n, fn = wl.dims["m"], wl.dims["n"], str(wl.attr("fn"))
    total = m * n
    lib = elementwise(hw, total, fn if fn in PIM_BINARY_FNS else PIM_ACTIVATION[fn])
    npad = lib.padded_shapes[0][0]
    srcs = ("a", "b") if fn in PIM_BINARY_FNS else ("a",)
    stage = m > 1
    local = {"x": "a", "y": "b", "z": "y"}
    if stage:
        local.update(x="a_stage", y="b_stage")
    streams, bufs = [], [Buffer(local.get(b.name, b.name), b.dtype, b.size)
                         for b in lib.program.buffers]
    prep: list = []
    if stage:
        for s in srcs:
            bufs.append(Buffer(s, "fp32", total))
            prep.append(HostOp("copy", (BufRef(f"{s}_stage", aff(0), (total,)),),
                               (BufRef(s, aff(0), (total,)),)))
        prep.append(Signal("start"))
    for s in lib.program.streams:
        body = rewrite_body(s.body, Rewrite(buffers=lambda b: (local.get(b, b), 0)))
        if s.engine == "host":
            body = (*prep, *body)
        elif stage:
            body = (Wait(("start",)), *body)
        streams.append(Stream(s.name, s.engine, s.channels, body))
    prog = Program(tuple(streams), tuple(bufs), name=f"elementwise_{fn}_pim_{m}x{n}")
    padded = (m, n) if stage else (1, npad)
    return Kernel(prog, srcs, "y", (m, n), _place_nothing,
                  input_shapes=tuple((m, n) for _ in srcs),
                  padded_shapes=tuple(padded for _ in srcs))
