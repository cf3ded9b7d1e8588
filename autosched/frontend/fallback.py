"""Ops no recogniser claims run on the host: an ``extern`` operator per op, its cost counted.

The operator's workload names the op (attr ``fn``: op name and a digest of everything
that decides its result: the op, its constant arguments, the views between its inputs'
producers and it), the shapes it reads and its cost; ``sim.host_ops`` runs it through the
callable registered under ``fn`` (torch, on float32 values), so the functional simulator
executes exactly what the module computes. Ops reading position-dependent values other
than through a recognised operator are refused.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable

import numpy as np
import torch

from sim.host_ops import register_extern

from .aten import AtenGraph, opname, replay_aliases
from .config import ModelError
from .patterns import Match

__all__ = ["host_match"]

Node = torch.fx.Node
_MATMULS = ("mm", "bmm", "matmul", "baddbmm", "addmm")


def _describe(x: object, g: AtenGraph) -> str:
    if isinstance(x, Node):
        steps = [f"{opname(a)}{a.args[1:]}{sorted(a.kwargs.items())}" for a in g.chain(x)]
        return f"T{AtenGraph.shape(g.root(x))}" + "".join(steps)
    if isinstance(x, list | tuple):
        return "[" + ",".join(_describe(v, g) for v in x) + "]"
    return repr(x)


def _callable(g: AtenGraph, node: Node, tensors: list[Node]) -> Callable[..., np.ndarray]:
    roots = [g.root(t) for t in tensors]

    def run(*arrays: np.ndarray) -> np.ndarray:
        vals = {}
        for t, r, a in zip(tensors, roots, arrays, strict=True):
            base = torch.from_numpy(np.asarray(a, np.float32).reshape(AtenGraph.shape(r)))
            vals[t] = replay_aliases(g.chain(t), base)

        def sub(x: object) -> object:
            if isinstance(x, Node):
                return vals[x]
            if isinstance(x, list | tuple):
                return type(x)(sub(v) for v in x)
            return x

        with torch.no_grad():
            out = node.target(*sub(node.args), **{k: sub(v) for k, v in node.kwargs.items()})
        return out.float().numpy().reshape(-1)

    return run


def _flat(x: object) -> list[Node]:
    if isinstance(x, Node):
        return [x]
    if isinstance(x, list | tuple):
        return [n for v in x for n in _flat(v)]
    return []


def host_match(g: AtenGraph, node: Node) -> Match:
    """The ``extern`` operator of one unrecognised op on activations."""
    val = node.meta.get("val")
    where = ".".join(str(v[0]) for v in (node.meta.get("nn_module_stack") or {}).values())[-80:]
    if not isinstance(val, torch.Tensor) or val.numel() == 0:
        raise ModelError(f"op {node.target} (module {where or '<root>'!r}) produces no "
                         "tensor autosched can hold; it cannot run on the host")
    args = _flat([*node.args, *node.kwargs.values()])
    acts = [a for a in args if a in g.active]
    params = [a for a in args if a not in g.active and g.param(a) is not None]
    other = [a for a in args if a not in g.active and g.param(a) is None]
    if other:
        raise ModelError(f"op {node.target} (module {where or '<root>'!r}) reads a "
                         "position-dependent value outside any recognised operator")
    shape = AtenGraph.shape(node)
    n = shape[-1] if shape else 1
    m = max(math.prod(shape) // max(n, 1), 1)
    desc = f"{node.target}|{_describe(list(node.args), g)}|{sorted(node.kwargs.items())}"
    key = f"{opname(node)}-{hashlib.sha256(desc.encode()).hexdigest()[:10]}"
    register_extern(key, _callable(g, node, [*acts, *params]))
    ins = ",".join("x".join(map(str, AtenGraph.shape(g.root(a)))) for a in acts)
    pshapes = ",".join("x".join(map(str, AtenGraph.shape(g.root(p)))) for p in params)
    flops = m * n
    if opname(node) in _MATMULS:
        flops = 2 * m * n * AtenGraph.shape(g.root(acts[0]))[-1] if acts else flops
    attrs = {"fn": key, "ins": ins, "params": pshapes, "flops": flops}
    return Match("extern", node, [g.root(a) for a in acts], dict(m=m, n=n), attrs,
                 {f"p{i}": g.param(p) for i, p in enumerate(params)}, {node},
                 extra={"op": str(node.target), "where": where})
