"""The LayerNorm kernel: one host op over every row.

Inputs (the compiler binds them by these names): ``x`` ``[m, n]`` the activation, then the
host constants ``w`` and ``b`` ``[n]``; output ``y`` ``[m, n]``, fp32, logical shapes. The
op keeps nothing in the banks.
"""

from __future__ import annotations

import numpy as np

from search_spaces import Workload
from sim.isa import BufRef, HostOp, aff
from sim.kernels import Kernel
from sim.program import Buffer, Program, Stream

__all__ = ["layernorm_kernel"]


def _place_nothing(mem: object, tensors: dict[str, np.ndarray]) -> None:
    """LayerNorm's weight and bias are host constants, bound at every execution."""


def layernorm_kernel(workload: Workload) -> Kernel:
    """``y = layernorm(x, w, b)`` with the workload's ``eps``; attr ``heads``: ``w`` and
    ``b`` hold ``heads * n`` values, row ``r`` taking head ``r % heads``'s."""
    m, n = workload.dims["m"], workload.dims["n"]
    heads = int(workload.attr("heads", 1))
    wn = heads * n
    attrs: tuple = (("eps", float(workload.attr("eps", 1e-5))),)
    if heads > 1:
        attrs += (("heads", heads),)
    op = HostOp("layernorm", (BufRef("y", aff(0), (m, n)),),
                (BufRef("x", aff(0), (m, n)), BufRef("w", aff(0), (wn,)),
                 BufRef("b", aff(0), (wn,))), attrs)
    bufs = (Buffer("x", "fp32", m * n), Buffer("w", "fp32", wn), Buffer("b", "fp32", wn),
            Buffer("y", "fp32", m * n))
    prog = Program((Stream("host", "host", (), (op,)),), bufs, name=f"layernorm_{m}x{n}")
    shapes = ((m, n), (wn,), (wn,))
    return Kernel(prog, ("x", "w", "b"), "y", (m, n), _place_nothing,
                  input_shapes=shapes, padded_shapes=shapes)
