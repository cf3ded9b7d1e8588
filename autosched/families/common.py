"""Helpers every family shares: reading a node's tensors from a model's weights, and the
float64 arithmetic of the reference evaluator.

A node names its tensors by local kernel name (``OpNode.params``: ``W``, ``b``, ``w``,
``table``, ``rotary``...) -> the module's parameter names, several joined by ``|`` when
a fused node stacks the tensors of the nodes it replaced.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from autosched.ir.errors import FusionError
from sim.errors import AutoschedError

__all__ = ["activate", "gated", "head_split", "joined", "layer_norm", "norm_weight", "rms_norm",
           "rotate", "rope_tables", "silu"]

Arr = np.ndarray


def joined(source: Any, node: Any, local: str) -> Arr:
    """The tensors of ``node``'s ``local`` (``|``-joined names) stacked by row (as
    ``Weights.get`` reads a joined name)."""
    return source.get(node.param(local) or "")


def norm_weight(source: Any, node: Any, local: str, n: int) -> Arr:
    """The norm scale ``local`` of ``node``, or ones when the norm has none."""
    name = node.param(local)
    return source.get(name) if name else np.ones(n, np.float32)


def norm_bias(source: Any, node: Any, local: str, n: int) -> Arr:
    """The norm shift ``local`` of ``node`` flattened, or zeros when the norm has none."""
    name = node.param(local)
    return source.get(name).reshape(-1) if name else np.zeros(n, np.float32)


def rope_tables(source: Any, node: Any, positions: Arr, d: int) -> tuple[Arr, Arr]:
    """cos, sin ``[len(positions), d]`` from the node's rotary module (``rotary``), as the
    model's own module computes them for these positions (every RoPE scaling; a module
    with tables per layer type is asked for the node's, ``rotary_kind``)."""
    path = node.param("rotary")
    if not path:
        raise AutoschedError(f"{node.name}: the capture found no module computing its "
                             "rotary tables")
    import torch  # the model's own module: torch only where a model runs

    mod = source.module(path)
    pos = torch.as_tensor(np.asarray(positions, dtype=np.int64))[None, :]
    kind = node.param("rotary_kind")
    with torch.no_grad():
        cos, sin = mod(torch.zeros(1, 1, d, dtype=torch.float32), pos, *((kind,) if kind else ()))
    cos, sin = (t.float().reshape(-1, t.shape[-1]).numpy() for t in (cos, sin))
    if cos.shape != (len(positions), d):
        raise AutoschedError(f"{node.name}: module {path!r} returned rotary tables of shape "
                             f"{cos.shape}, expected {(len(positions), d)}")
    return cos, sin


def head_split(graph: Any, node: Any) -> tuple[int, int]:
    """(columns of q, columns of k or v) in ``node``'s layer, from its attention (role
    ``attn``: query heads ``h``, KV heads ``kvh`` of ``d``)."""
    att = [n for n in graph if n.role == "attn" and n.layer == node.layer]
    if not att:
        raise FusionError(f"{node.name}: no attention node in layer {node.layer} gives "
                          "the head split of its q | k | v columns")
    d = att[0].workload.dims
    return d["h"] * d["d"], d["kvh"] * d["d"]


def gated(fn: object) -> bool:
    """Whether an activation name is the gated ``{act}_mul`` (``act(gate) * up``)."""
    from sim.activations import ACTIVATIONS

    return isinstance(fn, str) and fn.endswith("_mul") and fn[:-4] in ACTIVATIONS


def activate(fn: str, z: Arr) -> Arr:
    """``fn`` of ``z``: an activation, or ``{act}_mul`` of ``z`` = gate | up (halved)."""
    from sim.activations import ACTIVATIONS

    if gated(fn):
        half = z.shape[-1] // 2
        return ACTIVATIONS[fn[:-4]](z[..., :half]) * z[..., half:]
    return ACTIVATIONS[fn](z)


def silu(x: Arr) -> Arr:
    return x / (1.0 + np.exp(-x))


def rms_norm(x: Arr, w: Arr, eps: float) -> Arr:
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def layer_norm(x: Arr, w: Arr, b: Arr, eps: float) -> Arr:
    """LayerNorm of ``x`` over its last axis, times ``w`` plus ``b``."""
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def rotate(x: Arr, cos: Arr, sin: Arr) -> Arr:
    """Rotate-half RoPE of ``x`` [rows, heads, d] by the rows' ``cos``/``sin`` [rows, d]."""
    d = x.shape[-1]
    rot = np.concatenate([-x[..., d // 2:], x[..., :d // 2]], axis=-1)
    return x * cos[:, None] + rot * sin[:, None]
