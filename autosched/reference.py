"""Reference evaluator: run an operator graph (fused or not) on numpy, in float64.

``evaluate(graph, weights, ids)`` returns every node's output as ``[rows, width]``
(``autosched.fusion.output_width``). ``weights[node name][tensor]`` holds ``W`` (and
``b``, ``norm_w``, ``out_norm_w``) of linears, ``w`` of RMSNorms, ``table`` (and
``out_norm_w``) of the embedding; the fused graph's weights come from
``autosched.fusion.fuse_weights``.
Operands are gathered with ``autosched.fusion.operands``, so the evaluator checks the
binding rules the compiler uses. Rotary tables come from the step's positions
(:func:`rope_tables`). Attention reads and writes ``caches[node name] = (K, V)`` of
shape ``[b, kvh, L >= l, d]`` in place (the new tokens go to positions ``l-q .. l-1``,
like the device); missing caches start at zero.
"""

from __future__ import annotations

import numpy as np

from autosched.frontend import OpGraph, OpNode
from autosched.fusion import TOKEN_IDS, FusionError, operands
from search_spaces.pointwise import DEFAULT_EPS

__all__ = ["evaluate", "positions", "rope_tables"]

Arr = np.ndarray


def positions(graph: OpGraph) -> Arr:
    """Absolute position of each activation row (batch-major: row = seq * tokens + t)."""
    t = np.arange(graph.batch * graph.tokens) % graph.tokens
    return graph.context - graph.tokens + t


def rope_tables(graph: OpGraph, d: int, theta: float) -> tuple[Arr, Arr]:
    """cos, sin ``[rows, d]`` of the rotate-half convention, frequencies ``theta^(-2i/d)``."""
    inv = theta ** (-np.arange(0, d, 2, dtype=np.float64) / d)
    ang = np.outer(positions(graph).astype(np.float64), inv)
    ang = np.concatenate([ang, ang], axis=-1)
    return np.cos(ang), np.sin(ang)


def _silu(x: Arr) -> Arr:
    return x / (1.0 + np.exp(-x))


def _rmsnorm(x: Arr, w: Arr, eps: float) -> Arr:
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def _rotate(x: Arr, cos: Arr, sin: Arr) -> Arr:
    """Rotate-half RoPE of ``x`` [rows, heads, d] by the rows' ``cos``/``sin`` [rows, d]."""
    d = x.shape[-1]
    rot = np.concatenate([-x[..., d // 2:], x[..., :d // 2]], axis=-1)
    return x * cos[:, None] + rot * sin[:, None]


def _linear(node: OpNode, ops: dict[str, Arr], t: dict[str, Arr]) -> Arr:
    w, x = node.workload, ops["x"]
    if w.attr("prologue") == "rmsnorm":
        x = _rmsnorm(x, t["norm_w"], float(w.attr("eps", DEFAULT_EPS)))
    z = x @ np.asarray(t["W"], np.float64).T
    if w.attr("bias", 0):
        z = z + t["b"]
    if w.attr("epilogue") in ("add", "add_rmsnorm"):
        z = z + ops["r"]
    if w.attr("epilogue") == "add_rmsnorm":
        eps = float(w.attr("out_eps", DEFAULT_EPS))
        z = np.concatenate([z, _rmsnorm(z, t["out_norm_w"], eps)], axis=1)
    elif w.attr("epilogue") == "silu_mul":
        half = z.shape[1] // 2
        z = _silu(z[:, :half]) * z[:, half:]
    elif w.attr("epilogue") == "argmax":
        z = np.concatenate([z, np.argmax(z, axis=-1).astype(np.float64)[:, None]], axis=1)
    return z


def _attention(node: OpNode, ops: dict[str, Arr], caches: dict) -> Arr:
    d = node.workload.dims
    b, q, h, kvh, hd, length = d["b"], d["q"], d["h"], d["kvh"], d["d"], d["l"]
    if node.name not in caches:
        caches[node.name] = (np.zeros((b, kvh, length, hd)), np.zeros((b, kvh, length, hd)))
    kc, vc = caches[node.name]
    if kc.shape[2] < length:
        raise FusionError(f"{node.name}: cache holds {kc.shape[2]} positions, needs {length}")
    new = slice(length - q, length)
    kc[:, :, new] = ops["k"].reshape(b, q, kvh, hd).transpose(0, 2, 1, 3)
    vc[:, :, new] = ops["v"].reshape(b, q, kvh, hd).transpose(0, 2, 1, 3)
    qs = ops["q"].reshape(b, q, h, hd).transpose(0, 2, 1, 3)  # [b, h, q, d]
    group = np.arange(h) // (h // kvh)
    k, v = kc[:, group, :length], vc[:, group, :length]  # [b, h, l, d]
    s = qs @ k.transpose(0, 1, 3, 2) / np.sqrt(hd)
    visible = np.arange(length)[None, :] <= (length - q + np.arange(q))[:, None]
    s = np.where(visible, s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    out = (p / p.sum(-1, keepdims=True)) @ v  # [b, h, q, d]
    return out.transpose(0, 2, 1, 3).reshape(b * q, h * hd)


def _run(graph: OpGraph, node: OpNode, ops: dict[str, Arr], t: dict[str, Arr],
         caches: dict, theta: float) -> Arr:
    w = node.workload
    if w.op in ("gemv", "gemm") and w.attr("epilogue") == "rope":
        heads, d = int(w.attr("rope_heads")), int(w.attr("rope_d"))
        z = _linear(node, ops, t)
        m = z.shape[0]
        cos, sin = rope_tables(graph, d, theta)
        return np.concatenate([_rotate(z[:, : heads * d].reshape(m, heads, d), cos, sin)
                               .reshape(m, -1), z[:, heads * d:]], axis=1)
    if w.op in ("gemv", "gemm"):
        return _linear(node, ops, t)
    if w.op == "attention":
        return _attention(node, ops, caches)
    if w.op == "rmsnorm":
        return _rmsnorm(ops["x"], t["w"], float(w.attr("eps", DEFAULT_EPS)))
    if w.op == "rope":
        m, h, d = w.dims["m"], w.dims["h"], w.dims["d"]
        cos, sin = rope_tables(graph, d, theta)
        return _rotate(ops["x"].reshape(m, h, d), cos, sin).reshape(m, h * d)
    if w.op == "embedding":
        x = np.asarray(t["table"], np.float64)[ops["ids"][:, 0].astype(np.int64)]
        if w.attr("epilogue") == "rmsnorm":
            eps = float(w.attr("out_eps", DEFAULT_EPS))
            x = np.concatenate([x, _rmsnorm(x, t["out_norm_w"], eps)], axis=1)
        return x
    if w.op == "argmax":
        return np.argmax(ops["x"], axis=-1).astype(np.float64)[:, None]
    fn, a = w.attr("fn"), ops["a"]
    fns = {"add": lambda: a + ops["b"], "mul": lambda: a * ops["b"], "silu": lambda: _silu(a),
           "silu_mul": lambda: _silu(a) * ops["b"]}
    return fns[fn]()


def evaluate(graph: OpGraph, weights: dict[str, dict[str, Arr]], ids: Arr, *,
             theta: float = 10000.0, caches: dict | None = None) -> dict[str, Arr]:
    """Every node's output ``[rows, width]`` for token ``ids`` (``batch * tokens`` of them)."""
    ids = np.asarray(ids, np.float64).reshape(-1, 1)
    if ids.shape[0] != graph.batch * graph.tokens:
        raise FusionError(f"graph runs {graph.batch} x {graph.tokens} tokens, got {len(ids)} ids")
    caches = {} if caches is None else caches
    out: dict[str, Arr] = {TOKEN_IDS: ids}
    for node in graph:
        ops = {}
        for name, views in operands(graph, node).items():
            cols = []
            for v in views:
                src = out[v.source]
                cols.append((src[graph.tokens - 1::graph.tokens] if v.last else src)[:, v.lo:v.hi])
            ops[name] = np.concatenate(cols, axis=1)
        out[node.name] = _run(graph, node, ops, weights.get(node.name, {}), caches, theta)
    del out[TOKEN_IDS]
    return out
