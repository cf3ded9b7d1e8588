"""A deep model's step graph from a two-layer capture: decoder layers repeat exactly.

Capturing a Llama-family step with ``torch.export`` costs time in proportion to its
layers, and every layer's operators, shapes and wiring are the same. :func:`stacked_graph`
captures the model with two layers and repeats the second: layer ``i``'s nodes are layer
1's with ``l1.`` renamed ``l{i}.`` and inputs from ``l0.`` renamed ``l{i-1}.``; the nodes
after the layers read the last one. The result equals the full capture (the tests compare
them node for node).
"""

from __future__ import annotations

import dataclasses
import os

from autosched.frontend import ModelConfig, OpGraph, OpNode, get_model_config, model_graph
from sim.errors import InternalError

__all__ = ["stacked_graph"]


def _renamer(i: int):
    def rename(name: str) -> str:
        if name.startswith("l1."):
            return f"l{i}.{name[3:]}"
        if name.startswith("l0."):
            return f"l{i - 1}.{name[3:]}"
        return name
    return rename


def _param_at(p1: str, p0: str, i: int) -> str:
    """Layer ``i``'s name of parameter ``p1`` (layer 1's; ``p0`` is layer 0's): the one
    place they differ (``1`` against ``0``) becomes ``i``; shared parameters stay."""
    if p1 == p0:
        return p1
    a, b = p1.split("|"), p0.split("|")
    if len(a) != len(b):
        raise InternalError(f"layers 0 and 1 read different parameters: {p0!r}, {p1!r}")
    out = []
    for x, y in zip(a, b, strict=True):
        head = len(os.path.commonprefix([x, y]))
        tail = len(os.path.commonprefix([x[head:][::-1], y[head:][::-1]]))
        if (x[head:len(x) - tail], y[head:len(y) - tail]) != ("1", "0"):
            raise InternalError(f"layers 0 and 1 read {y!r} and {x!r}: not one layer index apart")
        out.append(f"{x[:head]}{i}{x[len(x) - tail:]}")
    return "|".join(out)


def _moved(n: OpNode, i: int, layer: bool, twin: OpNode | None = None) -> OpNode:
    """Node ``n`` of layer 1 (``layer``) or after the layers, moved to layer ``i``;
    ``twin``: its layer-0 node, whose parameter names locate the layer index."""
    rename = _renamer(i)
    params = n.params
    if layer and twin is not None:
        zero = dict(twin.params)
        params = tuple((k, _param_at(v, zero.get(k, v), i)) for k, v in n.params)
    return dataclasses.replace(n, name=rename(n.name) if layer else n.name,
                               inputs=tuple(rename(x) for x in n.inputs),
                               layer=i if layer else n.layer, params=params)


def stacked_graph(model: str | ModelConfig, *, phase: str = "decode", batch: int = 1,
                  context: int | None = None, capacity: int | None = None,
                  fusion: dict | None = None) -> tuple[ModelConfig, OpGraph]:
    """Config and graph of one step, as ``frontend.model_graph`` gives them."""
    cfg = get_model_config(model)
    kw = dict(phase=phase, batch=batch, context=context, capacity=capacity)
    kinds = {(cfg.window(i), cfg.layer_kind(i)) for i in range(cfg.layers)}
    if cfg.layers <= 2 or len(kinds) > 1:  # layers of several kinds: capture's own repeat
        return model_graph(cfg, fusion=fusion, **kw)
    # fused after stacking: a fusion across a layer boundary (the next block's norm into
    # this block's last linear) differs between the last layer and the others
    _, two = model_graph(cfg.subset((0, 1)), **kw)
    pre = [n for n in two.nodes if n.layer is None and two.nodes.index(n) < _first(two)]
    post = [n for n in two.nodes if n.layer is None and two.nodes.index(n) > _first(two)]
    l0 = [n for n in two.nodes if n.layer == 0]
    l1 = [n for n in two.nodes if n.layer == 1]
    nodes = [*pre, *l0]
    twins = {n.name[3:]: n for n in l0}
    for i in range(1, cfg.layers):
        nodes += [_moved(n, i, True, twins.get(n.name[3:])) for n in l1]
    nodes += [_moved(n, cfg.layers - 1, False) for n in post]
    graph = dataclasses.replace(two, nodes=tuple(nodes))
    if fusion:
        from autosched.fusion import apply_fusion  # the fusion pass reads frontend nouns

        graph = apply_fusion(graph, fusion)
    return cfg, graph


def _first(g: OpGraph) -> int:
    return next(i for i, n in enumerate(g.nodes) if n.layer is not None)
