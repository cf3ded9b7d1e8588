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
    """``y = layernorm(x, w, b)`` with the workload's ``eps``."""
    m, n = workload.dims["m"], workload.dims["n"]
    op = HostOp("layernorm", (BufRef("y", aff(0), (m, n)),),
                (BufRef("x", aff(0), (m, n)), BufRef("w", aff(0), (n,)),
                 BufRef("b", aff(0), (n,))), (("eps", float(workload.attr("eps", 1e-5))),))
    bufs = (Buffer("x", "fp32", m * n), Buffer("w", "fp32", n), Buffer("b", "fp32", n),
            Buffer("y", "fp32", m * n))
    prog = Program((Stream("host", "host", (), (op,)),), bufs, name=f"layernorm_{m}x{n}")
    shapes = ((m, n), (n,), (n,))
    return Kernel(prog, ("x", "w", "b"), "y", (m, n), _place_nothing,
                  input_shapes=shapes, padded_shapes=shapes)
