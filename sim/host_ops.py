"""Host operations: one table of semantics (numpy) and cost (FLOPs, bytes) per kind.

Inputs and outputs are the ``BufRef`` windows of a :class:`~sim.isa.HostOp`, shaped by
their ``shape``. The timing simulator charges ``op_overhead_ns + max(flops / peak,
bytes / bandwidth)``; the functional executor calls ``run``. Arithmetic is float32.

Any op may carry an epilogue, attr ``epi``: stages applied to its result in the same
dispatch (:mod:`sim.host_epilogue`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .activations import gelu_erf, gelu_tanh, silu, soft_cap
from .errors import ProgramError
from .hardware import DTYPE_BYTES
from .host_epilogue import EPILOGUES, apply, flops, layer_norm, own_width, rms, rotary, stages
from .host_softmax import (
    masked_softmax,
    merge_flops,
    part_bytes,
    part_flops,
    softmax_merge,
    softmax_part,
)
from .isa import HostOp

__all__ = ["HOST_OPS", "HostOpSpec", "arity", "cost", "register_extern", "run"]

Arr = np.ndarray


def _softcap(op: HostOp, x: Arr) -> Arr:
    return soft_cap(x, float(op.attr("cap")))


def _rmsnorm(op: HostOp, x: Arr, w: Arr) -> Arr:
    return rms(x, w, float(op.attr("eps", 1e-5)))


def _layernorm(op: HostOp, x: Arr, w: Arr, b: Arr) -> Arr:
    """LayerNorm over the last axis; ``w`` and ``b`` of ``heads * n`` values (attr
    ``heads``, default 1) give row ``r`` the scale and shift of head ``r % heads``."""
    heads, n = int(op.attr("heads", 1)), x.shape[-1]
    y = layer_norm(x.reshape(-1, heads, n), w.reshape(heads, n), b.reshape(heads, n),
                   float(op.attr("eps", 1e-5)))
    return y.reshape(x.shape)


def _softmax(op: HostOp, x: Arr) -> Arr:
    x = x * float(op.attr("scale", 1.0))
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _rope(op: HostOp, x: Arr, cos: Arr, sin: Arr) -> Arr:
    """Rotary embedding of x [..., head_dim] by cos/sin [..., r]: the first ``r`` columns
    of each head rotate (partial rotary), the rest pass; pairs are the two halves of those
    columns (rotate-half), or neighbours ``2i, 2i+1`` with attr ``pairs="interleaved"``."""
    return rotary(x, cos, sin, str(op.attr("pairs", "half")))


def _pad_cols(op: HostOp, x: Arr) -> Arr:
    """``x`` [R, w_in] as [R, w_out]: columns cut, or zero columns added (w_out from the
    output's shape)."""
    rows, w_out = op.outs[0].shape[0], op.outs[0].shape[-1]
    x = x.reshape(rows, -1)
    out = np.zeros((rows, w_out), np.float32)
    w = min(w_out, x.shape[1])
    out[:, :w] = x[:, :w]
    return out


def _matmul(op: HostOp, a: Arr, b: Arr) -> Arr:
    """a [..., M, K] @ b [..., N, K]^T (b transposed unless attr trans_b=0)."""
    if int(op.attr("trans_b", 1)):
        b = np.swapaxes(b, -1, -2)
    return np.matmul(a, b)


def _matmul_layout(op: HostOp, x: Arr, data: Arr) -> Arr:
    """x [..., M, K] @ W^T, W [N, K] taken from the banks' rows in the GEMV layout of the
    plan in attr ``plan`` (``sim.kernels.gemv``; N = the output's last dim): the host
    multiplies the weights where the units keep them, skipping the layout's padding."""
    from .kernels.gemv import unpack_layout

    w = unpack_layout(str(op.attr("plan")), data)
    return np.matmul(x, w[: own_width(op), : x.shape[-1]].T)


def _copy_cols(op: HostOp, src: Arr, base: Arr) -> Arr:
    """``base`` [R, W] (zeros with attr ``clear=1``) with columns ``col .. col+hi-lo`` taken
    from columns ``lo .. hi`` of ``src`` [R, Ws]: one op gathers or strips a column block
    of every row (a strided copy)."""
    lo, hi, col = int(op.attr("lo", 0)), int(op.attr("hi")), int(op.attr("col", 0))
    out = np.zeros_like(base) if int(op.attr("clear", 0)) else base.copy()
    out[..., col:col + hi - lo] = src[..., lo:hi]
    return out


def _permute(op: HostOp, x: Arr) -> Arr:
    """``x`` (shaped as the input) with its axes reordered by attr ``axes`` (comma-separated
    indices, as numpy's ``transpose``)."""
    axes = tuple(int(a) for a in str(op.attr("axes")).split(","))
    return np.transpose(x.reshape(op.ins[0].shape), axes)


def _gemv_out(op: HostOp, part: Arr) -> Arr:
    """A GEMV's result from its read-out partial sums ``part`` [rows_p, P, ks, width]
    (or [..., width, lanes] with lane partials): lanes and the ``ks`` reduction slices
    summed, giving [rows_p, P * width] row-major, of which the first ``m`` rows (the
    output's) and ``n`` columns (attr ``n``; the rest is padding) are the result."""
    x = part.reshape(op.ins[0].shape)
    if x.ndim == 5:
        x = x.sum(axis=-1)
    x = x.sum(axis=2).reshape(x.shape[0], -1)
    m = op.outs[0].size // op.outs[0].shape[-1]
    return x[:m, : int(op.attr("n"))]


def _reduce_sum(op: HostOp, x: Arr) -> Arr:
    return x.sum(axis=int(op.attr("axis", -1)))


def _embedding(op: HostOp, ids: Arr, table: Arr) -> Arr:
    return table[ids.astype(np.int64).reshape(-1)]


def _argmax(op: HostOp, x: Arr) -> Arr:
    return np.argmax(x, axis=-1).astype(np.float32)


# ``extern`` ops: computations the caller supplies by name (attr ``fn``), e.g. an op of
# a user's model that no operator family covers; FLOPs come from attr ``flops``
EXTERNS: dict[str, Callable[..., Arr]] = {}


def register_extern(name: str, fn: Callable[..., Arr]) -> None:
    """Make ``fn(*inputs) -> output`` the semantics of ``extern`` ops with attr ``fn=name``."""
    EXTERNS[name] = fn


def _extern(op: HostOp, *ins: Arr) -> Arr:
    fn = EXTERNS.get(str(op.attr("fn")))
    if fn is None:
        raise ProgramError(f"extern host op {op.attr('fn')!r} has no implementation in this "
                           "process (it is registered when its model is captured)")
    return fn(*ins)


@dataclass(frozen=True)
class HostOpSpec:
    """Arity (-1: any), semantics and FLOPs per output element (or a FLOP count function)."""

    n_in: int
    fn: Callable[..., Arr]
    flops: Callable[[HostOp], float]


def _per_out(k: float) -> Callable[[HostOp], float]:
    return lambda op: k * op.outs[0].size


def _matmul_flops(op: HostOp) -> float:
    return 2.0 * op.outs[0].size * op.ins[0].shape[-1] * own_width(op) / op.outs[0].shape[-1]


def _in_elems(k: float) -> Callable[[HostOp], float]:
    return lambda op: k * op.ins[0].size


def _softmax_flops(op: HostOp) -> float:
    return 5.0 * op.outs[0].size + (op.ins[0].size if len(op.ins[0].shape) > len(
        op.outs[0].shape) else 0)


HOST_OPS: dict[str, HostOpSpec] = {
    "copy": HostOpSpec(1, lambda op, x: x, _per_out(0)),
    "pad_cols": HostOpSpec(1, _pad_cols, _per_out(0)),
    "copy_cols": HostOpSpec(2, _copy_cols, _per_out(0)),
    "add": HostOpSpec(2, lambda op, a, b: a + b, _per_out(1)),
    "sub": HostOpSpec(2, lambda op, a, b: a - b, _per_out(1)),
    "mul": HostOpSpec(2, lambda op, a, b: a * b, _per_out(1)),
    "scale": HostOpSpec(1, lambda op, x: x * float(op.attr("alpha", 1.0)), _per_out(1)),
    "relu": HostOpSpec(1, lambda op, x: np.maximum(x, 0), _per_out(1)),
    "exp": HostOpSpec(1, lambda op, x: np.exp(x), _per_out(4)),
    "silu": HostOpSpec(1, lambda op, x: silu(x), _per_out(5)),
    "gelu": HostOpSpec(1, lambda op, x: gelu_tanh(x), _per_out(8)),
    "silu_mul": HostOpSpec(2, lambda op, a, b: silu(a) * b, _per_out(6)),
    "gelu_tanh": HostOpSpec(1, lambda op, x: gelu_tanh(x), _per_out(8)),
    "gelu_erf": HostOpSpec(1, lambda op, x: gelu_erf(x), _per_out(10)),
    "gelu_tanh_mul": HostOpSpec(2, lambda op, a, b: gelu_tanh(a) * b, _per_out(9)),
    "gelu_erf_mul": HostOpSpec(2, lambda op, a, b: gelu_erf(a) * b, _per_out(11)),
    "relu_mul": HostOpSpec(2, lambda op, a, b: np.maximum(a, 0) * b, _per_out(2)),
    "softcap": HostOpSpec(1, _softcap, _per_out(6)),
    "rmsnorm": HostOpSpec(2, _rmsnorm, _per_out(4)),
    "layernorm": HostOpSpec(3, _layernorm, _per_out(8)),
    "softmax": HostOpSpec(1, _softmax, _per_out(5)),
    "masked_softmax": HostOpSpec(1, masked_softmax, _softmax_flops),
    "softmax_part": HostOpSpec(2, softmax_part, part_flops),
    "softmax_merge": HostOpSpec(2, softmax_merge, merge_flops),
    "rope": HostOpSpec(3, _rope, _per_out(3)),
    "matmul": HostOpSpec(2, _matmul, _matmul_flops),
    "matmul_layout": HostOpSpec(2, _matmul_layout, _matmul_flops),
    "reduce_sum": HostOpSpec(1, _reduce_sum, _in_elems(1)),
    "gemv_out": HostOpSpec(1, _gemv_out, _in_elems(1)),
    "permute": HostOpSpec(1, _permute, _per_out(0)),
    "embedding": HostOpSpec(2, _embedding, _per_out(0)),
    "argmax": HostOpSpec(1, _argmax, _in_elems(1)),
    "extern": HostOpSpec(-1, _extern, lambda op: float(op.attr("flops", op.outs[0].size))),
}


def arity(op: HostOp) -> str | None:
    """Why ``op`` has the wrong kind or number of operands (None: it is well formed)."""
    spec = HOST_OPS.get(op.kind)
    if spec is None:
        return f"unknown host op {op.kind!r} (known: {', '.join(sorted(HOST_OPS))})"
    try:
        extra = sum(EPILOGUES[x][0] for x in stages(op))
    except ProgramError as e:
        return str(e)
    if (spec.n_in >= 0 and len(op.ins) != spec.n_in + extra) or len(op.outs) != 1:
        plus = f" (plus {extra} for its epilogue)" if extra else ""
        return (f"host op {op.kind!r} takes {spec.n_in} inputs{plus} and 1 output, "
                f"got {len(op.ins)} and {len(op.outs)}")
    return None


def _spec(op: HostOp) -> HostOpSpec:
    why = arity(op)
    if why is not None:
        raise ProgramError(why)
    return HOST_OPS[op.kind]


def _base_ins(op: HostOp) -> int:
    """Inputs of the op itself (the rest feed its epilogue)."""
    spec = HOST_OPS[op.kind]
    return len(op.ins) - sum(EPILOGUES[x][0] for x in stages(op)) if spec.n_in < 0 \
        else spec.n_in


def cost(op: HostOp, dtypes: dict[str, str]) -> tuple[float, float]:
    """(FLOPs, bytes moved) of one host op; ``dtypes`` maps buffer name to dtype."""
    spec = _spec(op)
    nbytes = sum(r.size * DTYPE_BYTES[dtypes[r.buf]] for r in (*op.ins, *op.outs))
    if op.kind == "embedding":  # only the gathered rows of the table move
        out = op.outs[0]
        eb, own = DTYPE_BYTES[dtypes[out.buf]], out.size // out.shape[-1] * own_width(op)
        nbytes = op.ins[0].size * 4 + (own + out.size) * eb + sum(
            r.size * DTYPE_BYTES[dtypes[r.buf]] for r in op.ins[2:])
    elif op.kind == "copy_cols":  # the column block moves (and the rest is zeroed if clear)
        out = op.outs[0]
        rows = out.size // out.shape[-1]
        block = rows * (int(op.attr("hi")) - int(op.attr("lo", 0)))
        eb_in, eb_out = DTYPE_BYTES[dtypes[op.ins[0].buf]], DTYPE_BYTES[dtypes[out.buf]]
        nbytes = block * (eb_in + eb_out) + int(op.attr("clear", 0)) * out.size * eb_out
    elif op.kind == "softmax_part":  # one stage's columns and statistics move
        nbytes = part_bytes(op, DTYPE_BYTES[dtypes[op.ins[0].buf]],
                            DTYPE_BYTES[dtypes[op.outs[0].buf]])
    return spec.flops(op) + flops(op), float(nbytes)


def run(op: HostOp, ins: list[Arr]) -> Arr:
    """Evaluate one host op on float32 arrays already shaped as the op's inputs."""
    spec = _spec(op)
    nb = _base_ins(op)
    out = spec.fn(op, *ins[:nb])
    if op.attr("epi"):
        out = apply(op, np.asarray(out, np.float32), list(ins[nb:]))
    shape = op.outs[0].shape
    out = np.asarray(out, dtype=np.float32)
    if out.size != int(np.prod(shape)):
        raise ProgramError(
            f"host op {op.kind!r} produced {out.size} elements for an output of shape {shape}"
        )
    return out.reshape(shape)
