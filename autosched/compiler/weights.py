"""Where each node's numbers come from in our torch model: bank weights and host constants.

Weights (``Lowering.tensors``) go into the banks once; constants (norm scales, biases,
rotary tables, the embedding table) are host buffers bound at every execution. Rotary
tables depend on the positions of the step.
"""

from __future__ import annotations

import numpy as np
import torch

from autosched.frontend import LlamaModel, ModelConfig, OpNode
from sim.errors import AutoschedError

__all__ = ["node_constants", "node_weights", "rope_tables"]

_LINEAR = {"q_proj": ("attn", "q_proj"), "k_proj": ("attn", "k_proj"),
           "v_proj": ("attn", "v_proj"), "o_proj": ("attn", "o_proj"),
           "ffn_gate": ("mlp", "gate_proj"), "ffn_up": ("mlp", "up_proj"),
           "ffn_down": ("mlp", "down_proj")}
_MERGED = {"qkv_proj": ("q_proj", "k_proj", "v_proj"), "gate_up": ("ffn_gate", "ffn_up")}
_NORMS = {"attn_norm": ("attn", "attn_norm"), "ffn_norm": ("mlp", "ffn_norm")}


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().to(torch.float32).cpu().numpy()


def _linear(model: LlamaModel, role: str, layer: int | None) -> torch.nn.Linear:
    if role == "lm_head":
        return model.lm_head
    if role in _LINEAR and layer is not None:
        block, name = _LINEAR[role]
        return getattr(getattr(model.layers[layer], block), name)
    raise AutoschedError(f"no linear layer for role {role!r} (layer {layer})")


def _linears(model: LlamaModel, node: OpNode) -> list[torch.nn.Linear]:
    roles = _MERGED.get(node.role, (node.role,))
    return [_linear(model, r, node.layer) for r in roles]


def _norm_module(model: LlamaModel, role: str, layer: int | None) -> torch.nn.Module:
    if role == "final_norm":
        return model.norm
    block, name = _NORMS[role]
    return getattr(getattr(model.layers[layer], block), name)


def _norm(model: LlamaModel, role: str, layer: int | None) -> np.ndarray:
    return _np(_norm_module(model, role, layer).weight)


def node_weights(model: LlamaModel, node: OpNode) -> dict[str, np.ndarray]:
    """The tensors ``place`` writes into the banks for ``node`` (linear layers: ``W``)."""
    if node.workload.op in ("gemv", "gemm"):
        return {"W": np.concatenate([_np(m.weight) for m in _linears(model, node)], axis=0)}
    return {}


def rope_tables(cfg: ModelConfig, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """cos, sin [len(positions), head_dim] in the rotate-half convention."""
    d = cfg.head_dim
    inv = 1.0 / (cfg.rope_theta ** (np.arange(0, d, 2, dtype=np.float64) / d))
    ang = np.outer(np.asarray(positions, dtype=np.float64), inv)
    ang = np.concatenate([ang, ang], axis=-1)
    return np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)


def node_constants(model: LlamaModel, cfg: ModelConfig, node: OpNode,
                   positions: np.ndarray) -> dict[str, np.ndarray]:
    """Host constants of ``node`` by local kernel buffer name (``positions`` per row)."""
    w, out = node.workload, {}
    if w.op == "rmsnorm":
        out["w"] = _norm(model, node.role, node.layer)
    elif w.op == "layernorm":
        mod = _norm_module(model, node.role, node.layer)
        out["w"], out["b"] = _np(mod.weight), _np(mod.bias)
    elif w.op == "embedding":
        out["table"] = _np(model.embed.weight)
    elif w.op == "rope":
        out["cos"], out["sin"] = rope_tables(cfg, positions)
    elif w.op in ("gemv", "gemm"):
        lins = _linears(model, node)
        if w.attr("bias", 0):
            out["b"] = np.concatenate([_np(m.bias) for m in lins])
        if w.attr("prologue") == "rmsnorm":
            norm_role = "attn_norm" if node.role in ("q_proj", "k_proj", "v_proj", "qkv_proj") \
                else "final_norm" if node.role == "lm_head" else "ffn_norm"
            out["norm_w"] = _norm(model, norm_role, node.layer)
    return out
