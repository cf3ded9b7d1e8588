"""Where each node's numbers come from: bank weights and host constants, by the parameter
names the capture recorded on the node (``OpNode.params``).

Weights (``W``) go into the banks once; constants (norm scales, biases, the embedding
table, rotary tables, a host op's parameters) are host buffers bound at every execution.
Rotary tables are what the model's own rotary module returns for the step's positions
(every RoPE scaling ``transformers`` implements, dynamic ones included).
"""

from __future__ import annotations

import numpy as np
import torch

from autosched.frontend import OpNode
from autosched.frontend.checkpoint import Weights
from autosched.frontend.fallback import BUFFER, POSITIONS
from autosched.frontend.renames import stored_names
from sim.errors import AutoschedError

__all__ = ["node_constants", "node_weights", "rope_tables"]


def _get(w: Weights, name: str) -> np.ndarray:
    """Tensor ``name``, or the same tensor under the name its checkpoint stores it by."""
    try:
        return w.get(name)
    except AutoschedError:
        for alt in stored_names(w.module(""), name):
            try:
                return w.get(alt)
            except AutoschedError:
                continue
        raise


def _joined(w: Weights, node: OpNode, local: str) -> np.ndarray:
    names = (node.param(local) or "").split("|")
    return np.concatenate([_get(w, n) for n in names], axis=0)


def node_weights(w: Weights, node: OpNode) -> dict[str, np.ndarray]:
    """The tensors ``place`` writes into the banks for ``node`` (linear layers: ``W``)."""
    if node.workload.op in ("gemv", "gemm"):
        return {"W": _joined(w, node, "W")}
    return {}


def rope_tables(w: Weights, node: OpNode, positions: np.ndarray) -> tuple[np.ndarray,
                                                                            np.ndarray]:
    """cos, sin ``[len(positions), head_dim]`` from the node's rotary module (a rope node,
    or a linear whose epilogue rotates: head dim attr ``rope_d``)."""
    path = node.param("rotary")
    if not path:
        raise AutoschedError(f"{node.name}: the capture found no module computing its "
                             "rotary tables")
    mod = w.module(path)
    d = int(node.workload.dims.get("d") or node.workload.attr("rope_d"))
    pos = torch.as_tensor(np.asarray(positions, dtype=np.int64))[None, :]
    kind = node.param("rotary_kind")  # a rotary module with tables per layer type
    with torch.no_grad():
        cos, sin = mod(torch.zeros(1, 1, d, dtype=torch.float32), pos,
                       *((kind,) if kind else ()))
    cos, sin = (t.float().reshape(-1, t.shape[-1]).numpy() for t in (cos, sin))
    if cos.shape != (len(positions), d):
        raise AutoschedError(f"{node.name}: module {path!r} returned rotary tables of shape "
                             f"{cos.shape}, expected {(len(positions), d)}")
    return cos, sin


def _host_constant(w: Weights, name: str, positions: np.ndarray) -> np.ndarray:
    """A host op's constant: a parameter, a module buffer, or the step's positions."""
    if name == POSITIONS:
        return np.asarray(positions, np.float32)
    if name.startswith(BUFFER):
        path, _, attr = name[len(BUFFER):].rpartition(".")
        buf = w.module(path).get_buffer(attr)
        return buf.detach().float().cpu().numpy().reshape(-1)
    return _get(w, name)


def node_constants(w: Weights, node: OpNode, positions: np.ndarray) -> dict[str, np.ndarray]:
    """Host constants of ``node`` by local kernel buffer name (``positions`` per row)."""
    op, out = node.workload.op, {}
    if op in ("rmsnorm", "layernorm"):
        out["w"] = w.get(node.param("w")) if node.param("w") else \
            np.ones(node.workload.dims["n"], np.float32)
        if op == "layernorm":  # a norm without bias (or without any parameter: OLMo)
            out["b"] = w.get(node.param("b")) if node.param("b") else \
                np.zeros(node.workload.dims["n"], np.float32)
    elif op == "embedding":
        out["table"] = w.get(node.param("table"))
        if node.workload.attr("epilogue") == "rmsnorm":
            out["out_norm_w"] = w.get(node.param("out_norm_w")) if node.param("out_norm_w") \
                else np.ones(node.workload.dims["n"], np.float32)
    elif op == "rope":
        out["cos"], out["sin"] = rope_tables(w, node, positions)
    elif op in ("gemv", "gemm"):
        if node.workload.attr("bias", 0):
            out["b"] = _joined(w, node, "b")
        if node.workload.attr("prologue") == "rmsnorm":
            out["norm_w"] = w.get(node.param("norm_w")) if node.param("norm_w") else \
                np.ones(node.workload.dims["k"], np.float32)
        if node.workload.attr("epilogue") == "rope":
            out["cos"], out["sin"] = rope_tables(w, node, positions)
        if node.workload.attr("epilogue") == "add_rmsnorm":
            out["out_norm_w"] = w.get(node.param("out_norm_w")) if node.param("out_norm_w") \
                else np.ones(node.workload.dims["n"], np.float32)
    elif op == "host":
        sizes = [int(np.prod([int(v) for v in s.split("x")])) for s in
                 str(node.workload.attr("params", "")).split(",") if s]
        for local, name in node.params:
            size = sizes[int(local[1:])]
            out[local] = _host_constant(w, name, positions)[:size]
    return out
