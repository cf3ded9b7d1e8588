"""The graph of one model step that every command agrees on: capture, workload
attributes, fusion.

``tune`` and ``compile`` must see the same workloads, or the schedules tuned for one
would never be found by the other; this module is the one place that decides them.
RMSNorm workloads carry the model's ``eps``; attention workloads carry ``capacity``, the
KV positions reserved, so the cache layout does not move as the context grows; q/k/v
projections of models with attention biases carry ``bias=1``.
"""

from __future__ import annotations

import dataclasses
from functools import lru_cache

from search_spaces import Workload

from ..defaults import DEFAULT_CONTEXT
from .capture import capture
from .config import ModelConfig
from .graph import OpGraph
from .zoo import get_model_config

__all__ = ["model_graph", "with_attrs", "with_context"]

_BIASED = ("q_proj", "k_proj", "v_proj")


def with_attrs(w: Workload, **attrs: object) -> Workload:
    """``w`` with ``attrs`` merged into its attributes."""
    merged = {**dict(w.attrs), **attrs}
    return Workload(w.op, w.shape, w.dtype, tuple(sorted(merged.items())))


def _normalise(graph: OpGraph, cfg: ModelConfig, capacity: int) -> OpGraph:
    nodes = []
    for n in graph.nodes:
        w = n.workload
        if w.op in ("rmsnorm", "layernorm"):
            w = with_attrs(w, eps=cfg.rms_eps)
        elif w.op == "attention":
            w = with_attrs(w, capacity=capacity)
        elif w.op in ("gemv", "gemm") and cfg.attention_bias and n.role in _BIASED:
            w = with_attrs(w, bias=1)
        nodes.append(dataclasses.replace(n, workload=w))
    return dataclasses.replace(graph, nodes=tuple(nodes))


@lru_cache(maxsize=16)
def _captured(cfg: ModelConfig, phase: str, batch: int, length: int) -> OpGraph:
    if phase == "decode":
        return capture(cfg, phase=phase, batch=batch, context=length)
    return capture(cfg, phase=phase, batch=batch, prompt=length)


def model_graph(model: str | ModelConfig, *, phase: str = "decode", batch: int = 1,
                context: int | None = None, capacity: int | None = None,
                fusion: dict | None = None) -> tuple[ModelConfig, OpGraph]:
    """Config and operator graph of one step: decode over ``context`` positions, or prefill
    of ``context`` prompt tokens. ``capacity`` (default: ``context``) sizes the KV cache."""
    cfg = get_model_config(model)
    length = context or DEFAULT_CONTEXT
    graph = _normalise(_captured(cfg, phase, batch, length), cfg, capacity or length)
    if fusion:
        from autosched.fusion import apply_fusion  # the fusion pass reads frontend nouns

        graph = apply_fusion(graph, fusion)
    return cfg, graph


def with_context(graph: OpGraph, context: int) -> OpGraph:
    """``graph`` with every attention workload attending over ``context`` positions."""
    nodes = []
    for n in graph.nodes:
        w = n.workload
        if w.op == "attention":
            dims = {**w.dims, "l": context}
            w = Workload.make("attention", w.dtype, dict(w.attrs), **dims)
        nodes.append(dataclasses.replace(n, workload=w))
    return dataclasses.replace(graph, nodes=tuple(nodes), context=context)
