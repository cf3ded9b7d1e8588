"""The host's softmax over attention scores: whole rows, or column stages merged later.

Scores are rows of ``n`` columns (cache slots); the attrs of a row's visibility are
those of ``masked_softmax`` (``scale``, ``softcap``, ``limit``, ``causal`` with
``group``, ``window``). A staged softmax splits the columns into stages at the
boundaries of attr ``bounds`` (``"0,512,1024"``): ``softmax_part`` normalises the
visible columns of one stage (attr ``stage``) by that stage's own maximum ``m`` and sum
``l`` and stores ``(m, l)`` per row after the probabilities, and ``softmax_merge``
weighs each stage's partial output by ``l e^(m - M)`` over all stages (``M`` the largest
``m``), which is the whole-row softmax exactly (up to rounding). A row that sees no
column of a stage gets zeros there and weight 0.
"""

from __future__ import annotations

import numpy as np

from .isa import HostOp

__all__ = ["bounds_of", "masked_softmax", "merge_flops", "part_bytes", "part_flops",
           "softmax_merge", "softmax_part"]

Arr = np.ndarray


def _visible(op: HostOp, x: Arr) -> tuple[Arr, Arr]:
    """(scaled and capped scores ``[rows, n]``, which columns each row sees)."""
    x = x * float(op.attr("scale", 1.0))
    cap = float(op.attr("softcap", 0.0))
    if cap:
        x = cap * np.tanh(x / cap)
    n = x.shape[-1]
    rows = x.reshape(-1, n)
    vis = np.full(rows.shape[0], int(op.attr("limit", n)))
    causal = int(op.attr("causal", 0))
    if causal:
        r = np.arange(rows.shape[0]) // int(op.attr("group", 1))
        vis = vis - causal + 1 + r % causal
    keep = np.arange(n)[None, :] < vis[:, None]
    window = int(op.attr("window", 0))
    if window:
        keep &= np.arange(n)[None, :] >= (vis - window)[:, None]
    return rows, keep


def _stage_stats(rows: Arr, keep: Arr) -> tuple[Arr, Arr, Arr]:
    """(probabilities, max, sum) over the visible columns of ``rows``; a row with none
    visible: zeros, max -inf, sum 0."""
    masked = np.where(keep, rows, -np.inf)
    m = masked.max(axis=-1, keepdims=True)
    e = np.where(keep, np.exp(masked - np.where(np.isfinite(m), m, 0.0)), 0.0)
    s = e.sum(axis=-1, keepdims=True)
    return e / np.where(s > 0, s, 1.0), m[:, 0], s[:, 0]


def _lanes(op: HostOp, x: Arr, rows: int) -> Arr:
    """Scores ``[rows, n]``: lane partials (an input with one axis more) summed first."""
    x = np.asarray(x)
    if x.ndim == 3:
        x = x.sum(axis=-1)
    return x.reshape(rows, -1)


def masked_softmax(op: HostOp, x: Arr) -> Arr:
    """Softmax over the last axis, columns at or past a row's limit excluded (output 0).

    An input with one axis more than the output holds partial sums: the extra (last)
    axis is summed first (lane partials of the scores, read out of the banks). Row ``r``
    of the flattened leading axes with ``causal`` Q is query ``i = (r // group) % Q`` and
    sees columns ``< limit - Q + 1 + i``; a ``window`` W keeps its last W visible columns.
    """
    if x.ndim > len(op.outs[0].shape):
        x = x.sum(axis=-1)
    rows, keep = _visible(op, x)
    return _stage_stats(rows, keep)[0].reshape(x.shape)


def bounds_of(op: HostOp) -> list[int]:
    """Attr ``bounds`` as a list of column indices."""
    return [int(b) for b in str(op.attr("bounds")).split(",")]


def softmax_part(op: HostOp, x: Arr, base: Arr) -> Arr:
    """Stage ``stage`` of a staged softmax: inputs scores (``[rows, n]`` or with lane
    partials) and the probability buffer ``[rows * n + stages * rows * 2]`` flat
    (probabilities, then per stage and row its ``(m, l)``), output that buffer with the
    stage's columns and statistics written and everything else as it was."""
    b, st, rows_n = bounds_of(op), int(op.attr("stage")), int(op.attr("rows"))
    nst, lo, hi = len(b) - 1, b[st], b[st + 1]
    sc = _lanes(op, x, rows_n)
    n = sc.shape[1]
    vals, keep = _visible(op, sc)
    p, m, s = _stage_stats(vals[:, lo:hi], keep[:, lo:hi])
    out = np.array(base, np.float32).reshape(-1)
    probs = out[: rows_n * n].reshape(rows_n, n)
    probs[:, lo:hi] = p
    stats = out[rows_n * n:].reshape(nst, rows_n, 2)
    stats[st, :, 0], stats[st, :, 1] = m, s
    return out


def softmax_merge(op: HostOp, stats: Arr, parts: Arr) -> Arr:
    """The attention output from each stage's statistics ``[stages, rows, 2]`` and its
    partial outputs ``parts [stages * k, rows * width]`` (``k`` partials per stage, stage
    by stage: sequence splits and V groups, summed first)."""
    nst, rows = stats.shape[0], stats.shape[1]
    y = np.asarray(parts, np.float64).reshape(nst, -1, rows, parts.shape[-1] // rows).sum(axis=1)
    m, s = np.asarray(stats[..., 0], np.float64), np.asarray(stats[..., 1], np.float64)
    top = m.max(axis=0, keepdims=True)
    w = np.where(s > 0, s * np.exp(np.where(s > 0, m - top, 0.0)), 0.0)  # [stages, rows]
    w = w / np.where(w.sum(axis=0, keepdims=True) > 0, w.sum(axis=0, keepdims=True), 1.0)
    return (w[..., None] * y).sum(axis=0).astype(np.float32)


def _stage_cols(op: HostOp) -> tuple[int, int]:
    """(score elements of the stage's columns over every row, lanes per score)."""
    b, st, rows = bounds_of(op), int(op.attr("stage")), int(op.attr("rows"))
    lanes = op.ins[0].shape[-1] if len(op.ins[0].shape) == 3 else 1
    return rows * (b[st + 1] - b[st]), lanes


def part_flops(op: HostOp) -> float:
    """A stage's exponent, max, sum and division per column it owns (plus lane sums)."""
    cols, lanes = _stage_cols(op)
    return 5.0 * cols + (cols * lanes if lanes > 1 else 0)


def part_bytes(op: HostOp, in_bytes: int, out_bytes: int) -> float:
    """Bytes a stage moves: its columns of the scores in, of the probabilities out, and
    its statistics (the rest of both buffers is not touched)."""
    cols, lanes = _stage_cols(op)
    rows = int(op.attr("rows"))
    return float(cols * lanes * in_bytes + cols * out_bytes + 2 * rows * out_bytes)


def merge_flops(op: HostOp) -> float:
    """Two multiply-adds per partial output element, and the weights."""
    return 2.0 * op.ins[1].size + 4.0 * op.ins[0].size
