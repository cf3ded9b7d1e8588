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

from autosched.frontend import ModelConfig, OpGraph, OpNode, get_model_config, model_graph

__all__ = ["stacked_graph"]


def _renamer(i: int):
    def rename(name: str) -> str:
        if name.startswith("l1."):
            return f"l{i}.{name[3:]}"
        if name.startswith("l0."):
            return f"l{i - 1}.{name[3:]}"
        return name
    return rename


def _moved(n: OpNode, i: int, layer: bool) -> OpNode:
    rename = _renamer(i)
    return dataclasses.replace(n, name=rename(n.name) if layer else n.name,
                               inputs=tuple(rename(x) for x in n.inputs),
                               layer=i if layer else n.layer)


def stacked_graph(model: str | ModelConfig, *, phase: str = "decode", batch: int = 1,
                  context: int | None = None, capacity: int | None = None,
                  fusion: dict | None = None) -> tuple[ModelConfig, OpGraph]:
    """Config and graph of one step, as ``frontend.model_graph`` gives them."""
    cfg = get_model_config(model)
    kw = dict(phase=phase, batch=batch, context=context, capacity=capacity, fusion=fusion)
    if cfg.layers <= 2:
        return model_graph(cfg, **kw)
    _, two = model_graph(dataclasses.replace(cfg, layers=2), **kw)
    pre = [n for n in two.nodes if n.layer is None and two.nodes.index(n) < _first(two)]
    post = [n for n in two.nodes if n.layer is None and two.nodes.index(n) > _first(two)]
    l0 = [n for n in two.nodes if n.layer == 0]
    l1 = [n for n in two.nodes if n.layer == 1]
    nodes = [*pre, *l0]
    for i in range(1, cfg.layers):
        nodes += [_moved(n, i, True) for n in l1]
    nodes += [_moved(n, cfg.layers - 1, False) for n in post]
    return cfg, dataclasses.replace(two, nodes=tuple(nodes))


def _first(g: OpGraph) -> int:
    return next(i for i, n in enumerate(g.nodes) if n.layer is not None)
