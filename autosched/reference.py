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

from dataclasses import dataclass, field

import numpy as np

from autosched.families import family_of
from autosched.fusion import TOKEN_IDS, FusionError, operands
from autosched.ir import OpGraph

__all__ = ["Env", "evaluate", "positions", "rope_tables"]

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


@dataclass
class Env:
    """What a family's reference semantics may read of the step: its graph, the RoPE base,
    and the attention caches (node name -> (K, V) ``[b, kvh, L, d]``, updated in place)."""

    graph: OpGraph
    theta: float = 10000.0
    caches: dict = field(default_factory=dict)

    def tables(self, d: int) -> tuple[Arr, Arr]:
        """cos, sin ``[rows, d]`` for the step's positions."""
        return rope_tables(self.graph, d, self.theta)


def evaluate(graph: OpGraph, weights: dict[str, dict[str, Arr]], ids: Arr, *,
             theta: float = 10000.0, caches: dict | None = None) -> dict[str, Arr]:
    """Every node's output ``[rows, width]`` for token ``ids`` (``batch * tokens`` of them)."""
    ids = np.asarray(ids, np.float64).reshape(-1, 1)
    if ids.shape[0] != graph.batch * graph.tokens:
        raise FusionError(f"graph runs {graph.batch} x {graph.tokens} tokens, got {len(ids)} ids")
    env = Env(graph, theta, {} if caches is None else caches)
    out: dict[str, Arr] = {TOKEN_IDS: ids}
    for node in graph:
        ops = {}
        for name, views in operands(graph, node).items():
            cols = []
            for v in views:
                src = out[v.source]
                if v.width:  # the whole output read as rows of another width (per head)
                    cols.append(src.reshape(-1, v.width))
                    continue
                cols.append((src[graph.tokens - 1::graph.tokens] if v.last else src)[:, v.lo:v.hi])
            ops[name] = np.concatenate(cols, axis=1)
        fam = family_of(node.workload)
        out[node.name] = fam.reference(node, ops, weights.get(node.name, {}), env)
    del out[TOKEN_IDS]
    return out
