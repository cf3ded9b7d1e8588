"""The graph Dynamo hands the backend, as autosched sees it.

``trace`` exports the Dynamo graph to ATen with the call's example inputs, tells which
input is what (parameters: ``arg{i}``; the token ids: the embedding's indices; the token
positions: the integers the rotary tables are computed from), matches its operators and
names them like a capture. Anything it cannot use raises :class:`ModelError`; the
backend then runs that graph eagerly and says why.
"""

from __future__ import annotations

import warnings
from collections import deque
from dataclasses import dataclass

import torch

from autosched.frontend.aten import AtenGraph, Placeholder
from autosched.frontend.config import ModelError
from autosched.frontend.lower import find_matches
from autosched.frontend.match import Kind, Match
from autosched.frontend.roles import to_nodes
from autosched.ir import OpNode

__all__ = ["StepGraph", "trace"]

Node = torch.fx.Node
_DTYPES = {torch.float16: "fp16", torch.bfloat16: "bf16", torch.float32: "fp16"}
# kinds whose result is token-major rows the caller may read (attention writes caches)
_TOKEN_MAJOR = (Kind.LINEAR, Kind.NORM, Kind.POINTWISE, Kind.LOOKUP, Kind.OP, Kind.SELECT)


@dataclass
class StepGraph:
    """An exported Dynamo graph, its inputs' roles and its operators."""

    g: AtenGraph
    inputs: list[Node]  # placeholders of the user inputs, in call order
    constants: dict[Node, torch.Tensor]  # other placeholders and their values
    matches: list[Match]
    nodes: list[OpNode]
    ids: Node
    positions: Node
    batch: int
    tokens: int

    def match_of(self, node: Node) -> Match | None:
        for m in self.matches:
            if m.out is node or node in (m.extra.get("q_out"), m.extra.get("k_out")):
                return m
        return None


def _positions(g: AtenGraph, cos: Node) -> Node:
    """The integer values the rotary tables are computed from (the token positions)."""
    seen, todo = set(), deque([g.root(cos)])
    while todo:
        n = todo.popleft()
        if not isinstance(n, Node) or n in seen:
            continue
        seen.add(n)
        val = n.meta.get("val")
        if n.op == "placeholder" and isinstance(val, torch.Tensor) and \
                not val.is_floating_point():
            return n
        todo.extend(n.all_input_nodes)
    raise ModelError("the rotary tables are not computed from integer positions")


def _check_outputs(sg_g: AtenGraph, matches: list[Match], outputs: list[object]) -> None:
    ok = {m.out for m in matches if m.kind in _TOKEN_MAJOR}
    ok |= {m.extra[k] for m in matches if m.kind is Kind.ROTARY for k in ("q_out", "k_out")
           if k in m.extra}
    writes = {n for m in matches if m.kind is Kind.ATTENTION for n in m.nodes}
    for o in outputs:
        r = sg_g.root(o)
        if isinstance(r, Node) and r in sg_g.active and r not in ok and r not in writes:
            raise ModelError(f"the graph returns {r.name}, a value inside an operator")


def trace(gm: torch.fx.GraphModule, example_inputs: list) -> StepGraph:
    """The :class:`StepGraph` of a Dynamo graph and its example inputs."""
    if not all(isinstance(x, torch.Tensor) for x in example_inputs):
        raise ModelError("the graph takes symbolic sizes (dynamic shapes)")
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ep = torch.export.export(gm, tuple(example_inputs), strict=False)
    except Exception as e:  # noqa: BLE001 - any export failure means: run it eagerly
        raise ModelError(f"torch.export of the graph failed: {str(e).splitlines()[0][:200]}") \
            from e
    specs = ep.graph_signature.input_specs
    user = [s for s in specs if s.kind.name == "USER_INPUT"]
    kinds: dict[str, Placeholder] = {}
    for i, s in enumerate(user):
        is_param = isinstance(example_inputs[i], torch.nn.Parameter)
        kinds[s.arg.name] = Placeholder("param" if is_param else "const", f"arg{i}")
    values = {**ep.state_dict, **ep.constants}
    by_name = {n.name: n for n in ep.graph.nodes if n.op == "placeholder"}
    constants = {by_name[s.arg.name]: values[s.target] for s in specs
                 if s.kind.name != "USER_INPUT" and s.target in values}
    emb = [n for n in ep.graph.nodes if n.op == "call_function"
           and getattr(n.target, "overloadpacket", None) is torch.ops.aten.embedding]
    ids = emb[0].args[1] if emb else None
    if not isinstance(ids, Node) or ids.name not in kinds:
        raise ModelError("the graph has no embedding of input token ids")
    kinds[ids.name] = Placeholder("ids", kinds[ids.name].target)
    g = AtenGraph(ep.graph, kinds)
    matches = find_matches(g)
    ropes = [m for m in matches if m.kind is Kind.ROTARY]
    if not any(m.kind is Kind.ATTENTION for m in matches) or not ropes:
        raise ModelError("the graph has no rotary attention")
    for m in ropes:
        m.extra["rotary"] = f"rope:{m.out.name}"
    out_node = next(n for n in ep.graph.nodes if n.op == "output")
    _check_outputs(g, matches, list(torch.fx.node.map_arg(out_node.args[0], lambda n: n)))
    dtype = next((_DTYPES[x.dtype] for x in example_inputs
                  if isinstance(x, torch.nn.Parameter) and x.dtype in _DTYPES), "fp16")
    nodes = to_nodes(g, matches, dtype)
    batch, tokens = AtenGraph.shape(ids)[0], AtenGraph.shape(ids)[-1]
    return StepGraph(g, [by_name[s.arg.name] for s in user], constants, matches, nodes, ids,
                     _positions(g, ropes[0].extra["cos"]), batch, tokens)
