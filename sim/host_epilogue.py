"""Host-op epilogues: the stages a host op may apply to its result in the same dispatch.

A host op's attr ``epi`` lists stages of :data:`EPILOGUES`, comma-separated. The inputs
they read follow the op's own inputs, in stage order:

- ``bias`` (one value per column) and ``add`` (one per element): one input each;
- an activation of :data:`~sim.activations.ACTIVATIONS` applies it to every element;
  ``{act}_mul`` gates the first half of the last axis with the second
  (``act(gate) * up``), halving it;
- ``rmsnorm`` (input ``w``, attr ``post_eps``) normalises the value in place (a
  post-norm); ``rmsnorm_cat`` (input ``w``, attr ``eps``) appends the value's RMS norm
  times ``w``, doubling the last axis: the residual and the next layer's normalised input
  at once; ``layernorm_cat`` (inputs ``w``, ``b``, attr ``eps``) appends its LayerNorm
  the same way;
- ``rope`` (inputs ``cos``, ``sin`` [rows, r]) rotates the first attr ``rope_heads``
  heads of each row: heads of attr ``rope_d`` columns (default ``r``) whose first ``r``
  rotate (partial rotary), pairs the two halves of those (rotate-half) or neighbours
  ``2i, 2i+1`` (attr ``pairs="interleaved"``); ``qknorm`` (inputs ``wq``, ``wk`` [d], attrs
  ``qk_heads``, ``qk_eps``) RMS-normalises those heads first, the first ``qk_heads`` with
  ``wq`` and the others with ``wk``; ``qklnorm`` LayerNorms them instead (no shift:
  Cohere); with attr ``qk_per_head`` 1 ``wq`` holds ``qk_heads`` rows of ``d`` and ``wk``
  one row per other head (a scale per head);
- ``softcap`` (attr ``cap``) caps every element softly, ``cap * tanh(x / cap)`` (Gemma 2's
  final logits);
- ``argmax_cat`` appends each row's argmax as one more column: the logits and the next
  token at once.
"""

from __future__ import annotations

import numpy as np

from .activations import ACT_FLOPS, ACTIVATIONS, soft_cap
from .errors import ProgramError
from .isa import HostOp

__all__ = ["EPILOGUES", "apply", "flops", "grown_width", "layer_norm", "own_width", "rms",
           "rotary", "stages"]

Arr = np.ndarray

# epilogue stage -> (extra inputs, FLOPs per element of the value it is applied to)
EPILOGUES: dict[str, tuple[int, float]] = {
    "bias": (1, 1.0), "add": (1, 1.0), "silu_mul": (0, 3.0), "rmsnorm_cat": (1, 4.0),
    "layernorm_cat": (2, 8.0),
    "rope": (2, 3.0), "argmax_cat": (0, 1.0), "qknorm": (2, 4.0), "qklnorm": (2, 8.0),
    "rmsnorm": (1, 4.0), "softcap": (0, 6.0), **{a: (0, f) for a, f in ACT_FLOPS.items()},
    **{f"{a}_mul": (0, (f + 1) / 2) for a, f in ACT_FLOPS.items() if a != "silu"}}


_CAT_NORMS = ("rmsnorm_cat", "layernorm_cat")  # stages that append a normalised copy


def stages(op: HostOp) -> list[str]:
    """The op's epilogue stages in order; an unknown stage is a ProgramError."""
    out = [x for x in str(op.attr("epi", "")).split(",") if x]
    bad = [x for x in out if x not in EPILOGUES]
    if bad:
        raise ProgramError(f"host op {op.kind!r}: epilogue stage {bad[0]!r} unknown "
                           f"(known: {', '.join(EPILOGUES)})")
    return out


def grown_width(st: str, w: int) -> int:
    """Width of a value after epilogue stage ``st`` (``w`` before it)."""
    return w // 2 if st.endswith("_mul") else 2 * w if st in _CAT_NORMS \
        else w + 1 if st == "argmax_cat" else w


def own_width(op: HostOp) -> int:
    """Last-axis width of the op's own result: its output's, undoing the epilogue's
    ``argmax_cat`` (one more column), ``rmsnorm_cat`` (doubles) and ``silu_mul`` (halves)."""
    w = op.outs[0].shape[-1]
    for st in reversed(stages(op)):
        w = w * 2 if st.endswith("_mul") else w // 2 if st in _CAT_NORMS \
            else w - 1 if st == "argmax_cat" else w
    return w


def rms(x: Arr, w: Arr, eps: float) -> Arr:
    """RMS norm of ``x`` over its last axis, times ``w``."""
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def layer_norm(x: Arr, w: Arr, b: Arr, eps: float) -> Arr:
    """LayerNorm of ``x`` over its last axis, times ``w`` plus ``b``."""
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def rotary(x: Arr, cos: Arr, sin: Arr, pairs: str = "half") -> Arr:
    """``x`` [..., d] with its first ``r`` columns rotated by ``cos``/``sin`` [..., r]
    (broadcast), the rest passed: pairs the two halves of those columns (``half``,
    rotate-half) or neighbours ``2i, 2i+1`` (``interleaved``)."""
    r = cos.shape[-1]
    head = x[..., :r]
    if pairs == "interleaved":
        rot = np.stack([-head[..., 1::2], head[..., 0::2]], axis=-1).reshape(head.shape)
    else:
        rot = np.concatenate([-head[..., r // 2:], head[..., : r // 2]], axis=-1)
    return np.concatenate([head * cos + rot * sin, x[..., r:]], axis=-1)


def _rope_cols(x: Arr, cos: Arr, sin: Arr, heads: int, d: int, pairs: str) -> Arr:
    """``x`` [rows, w] with its first ``heads`` heads of ``d`` columns rotated by the
    rows' ``cos``/``sin`` [rows, r] (:func:`rotary`, as the ``rope`` op)."""
    rows, r = x.shape[0], cos.shape[-1]
    head = x[:, : heads * d].reshape(rows, heads, d)
    head = rotary(head, cos.reshape(-1, 1, r), sin.reshape(-1, 1, r), pairs)
    return np.concatenate([head.reshape(rows, -1), x[:, heads * d:]], axis=1)


def _qk_norms(x: Arr, wq: Arr, wk: Arr, qh: int, heads: int, eps: float, *,
              layer: bool = False, per_head: bool = False) -> Arr:
    """``x`` [rows, w] with its first ``qh`` heads of ``d`` columns normalised with scale
    ``wq``, the next ``heads - qh`` with ``wk``, the rest unchanged: RMS norms, or
    LayerNorms without shift (``layer``). ``wq`` is [d] (``d = len(wq)``), or with
    ``per_head`` [qh, d] and ``wk`` [heads - qh, d]."""
    d, rows = (wq.size // qh if per_head else wq.size), x.shape[0]
    head = x[:, : heads * d].reshape(rows, heads, d)
    scale = np.concatenate([wq.reshape(qh, d), wk.reshape(heads - qh, d)]) if per_head \
        else np.concatenate([np.tile(wq, (qh, 1)), np.tile(wk, (heads - qh, 1))])
    normed = layer_norm(head, scale, 0.0, eps) if layer else rms(head, scale, eps)
    return np.concatenate([normed.reshape(rows, -1), x[:, heads * d:]], axis=1)


def apply(op: HostOp, x: Arr, extra: list[Arr]) -> Arr:
    """``x``, the op's own result, after each of its stages; ``extra`` are their inputs."""
    it = iter(extra)
    for st in stages(op):
        if st.endswith("_mul"):  # act(gate) * up
            h = x.shape[-1] // 2
            x = ACTIVATIONS[st[:-4]](x[..., :h]) * x[..., h:]
        elif st in ACTIVATIONS:
            x = ACTIVATIONS[st](x)
        elif st == "rmsnorm":  # a post-norm: the value normalised in place (attr post_eps)
            x = rms(x, next(it).reshape(-1), float(op.attr("post_eps", 1e-5)))
        elif st == "add":  # one value per element
            x = x + next(it).reshape(x.shape)
        elif st == "rmsnorm_cat":
            w = next(it).reshape(-1)
            x = np.concatenate([x, rms(x, w, float(op.attr("eps", 1e-5)))], axis=-1)
        elif st == "layernorm_cat":
            w, b = next(it).reshape(-1), next(it).reshape(-1)
            x = np.concatenate([x, layer_norm(x, w, b, float(op.attr("eps", 1e-5)))], axis=-1)
        elif st == "rope":
            cos, sin = next(it), next(it)
            x = _rope_cols(x, cos, sin, int(op.attr("rope_heads")),
                           int(op.attr("rope_d", cos.shape[-1])), str(op.attr("pairs", "half")))
        elif st in ("qknorm", "qklnorm"):  # per-head norms of q's heads, then k's
            x = _qk_norms(x, next(it).reshape(-1), next(it).reshape(-1),
                          int(op.attr("qk_heads")), int(op.attr("rope_heads")),
                          float(op.attr("qk_eps", 1e-6)), layer=st == "qklnorm",
                          per_head=bool(int(op.attr("qk_per_head", 0))))
        elif st == "softcap":
            x = soft_cap(x, float(op.attr("cap")))
        elif st == "argmax_cat":
            idx = np.argmax(x, axis=-1).astype(np.float32)[..., None]
            x = np.concatenate([x, idx], axis=-1)
        else:  # bias: one value per column
            x = x + next(it).reshape(-1)
    return x


def flops(op: HostOp) -> float:
    """FLOPs of the epilogue: each stage on the value it receives (twice the output's
    width before a ``silu_mul``)."""
    out = op.outs[0]
    rows, w, total = out.size // out.shape[-1], own_width(op), 0.0
    for st in stages(op):
        total += EPILOGUES[st][1] * rows * w
        w = grown_width(st, w)
    return total
