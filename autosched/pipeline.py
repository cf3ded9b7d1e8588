"""The graph of one model step that every command agrees on: capture, then each family's
view of its workloads in the step, then fusion.

``tune`` and ``compile`` must see the same workloads, or the schedules tuned for one
would never be found by the other; this module is the one place that decides them. The
capture (:mod:`autosched.frontend`) produces the operator graph, each family adapts its
workloads to the step (attention: the KV ``capacity`` reserved and the sliding
``window``; moe: the layer's measured ``route``), and fusion (:mod:`autosched.fusion`)
rewrites the graph by a plan. Norm ``eps`` and linear ``bias`` come from the captured
graph itself.
"""

from __future__ import annotations

import dataclasses
from functools import lru_cache
from typing import Any

from .defaults import DEFAULT_CONTEXT
from .families import family_of
from .ir import OpGraph, Step

__all__ = ["model_graph", "step_graph", "step_of", "with_attrs", "with_context"]


def step_of(model: Any, *, phase: str = "decode", batch: int = 1, context: int | None = None,
            capacity: int | None = None) -> Step:
    """The :class:`Step` of ``model`` (a built-in name, config.json or checkpoint path,
    ``transformers`` model or config, or a ``ModelConfig``), resolved once: ``context``
    defaults to :data:`~autosched.defaults.DEFAULT_CONTEXT`, capped at the model's
    ``max_positions``; one beyond them is refused with the model's limit."""
    from .frontend import ModelError, get_model_config

    cfg = get_model_config(model)
    length = context if context is not None else min(DEFAULT_CONTEXT, cfg.max_positions)
    step = Step(cfg, phase, batch, length, capacity)
    if length > cfg.max_positions:
        what = "context" if phase == "decode" else "prompt"
        raise ModelError(f"{what}={length} exceeds {cfg.name}'s max_positions="
                         f"{cfg.max_positions}")
    return step


def with_attrs(w: Any, **attrs: object) -> Any:
    """Workload ``w`` with ``attrs`` merged into its attributes."""
    merged = {**dict(w.attrs), **attrs}
    return dataclasses.replace(w, attrs=tuple(sorted(merged.items())))


def _adapted(graph: OpGraph, step: Step) -> OpGraph:
    capacity = step.kv_capacity
    nodes = []
    for n in graph.nodes:
        window = step.model.window(n.layer) if n.layer is not None else 0
        route = step.model.route(n.layer) if n.layer is not None else ()
        w = family_of(n.workload).adapt(n.workload, window=window, capacity=capacity,
                                        route=route)
        nodes.append(dataclasses.replace(n, workload=w))
    return dataclasses.replace(graph, nodes=tuple(nodes))


@lru_cache(maxsize=16)
def _captured(step: Step) -> OpGraph:
    from .frontend import capture

    one = step.replace(capacity=None)
    if one.phase == "decode":
        return capture(one.model, phase="decode", batch=one.batch, context=one.context)
    return capture(one.model, phase="prefill", batch=one.batch, prompt=one.context)


def step_graph(step: Step, fusion: dict | None = None) -> OpGraph:
    """The operator graph of ``step``, adapted by every family and fused by ``fusion`` (a
    plan; None or ``{}`` for none)."""
    graph = _adapted(_captured(step.replace(capacity=None)), step)
    if fusion:
        from .fusion import apply_fusion

        graph = apply_fusion(graph, fusion)
    return graph


def with_context(graph: OpGraph, context: int) -> OpGraph:
    """``graph`` with every workload over ``context`` positions (decode grows its cache)."""
    nodes = tuple(dataclasses.replace(n, workload=family_of(n.workload).with_context(
        n.workload, context)) for n in graph.nodes)
    return dataclasses.replace(graph, nodes=nodes, context=context)


def model_graph(model: Any, *, phase: str = "decode", batch: int = 1,
                context: int | None = None, capacity: int | None = None,
                fusion: dict | None = None) -> tuple[Any, OpGraph]:
    """(config, graph) of one step of ``model`` (anything :func:`step_of` resolves): the
    public shortcut of ``step_graph(step_of(...), fusion)``."""
    step = step_of(model, phase=phase, batch=batch, context=context, capacity=capacity)
    return step.model, step_graph(step, fusion)
