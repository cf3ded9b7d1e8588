"""Ops no recogniser claims run on the host: an ``extern`` operator per op, its cost counted.

The operator's workload names the op (attr ``fn``: op name and a digest of everything
that decides its result: the op, its constant arguments, the views between its inputs'
producers and it, the static values it reads), the shapes it reads and its cost;
``sim.host_ops`` runs it through the callable registered under ``fn`` (torch, on float32
values), so the functional simulator executes exactly what the module computes.

A static input (one that does not depend on the tokens) is recomputed inside the
callable from what it is made of: parameters (``1 + w``), module buffers (Gemma's
embedding scale, rotary frequencies) and the step's positions (rotary tables, masks);
each becomes a constant of the operator (:data:`POSITIONS`, ``buffer:`` + name, or the
parameter's name). A static value read from anything else (the KV cache, a lifted
constant) is refused. One output of a multi-output op (``split``) is its own operator.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable

import numpy as np
import torch

from autosched.frontend.aten import AtenGraph, opname, replay_aliases
from autosched.frontend.match import Kind, Match
from autosched.ir.errors import ModelError
from sim.host_ops import register_extern

from .families import BUFFER, POSITIONS

__all__ = ["host_match", "table_fn", "tables_of"]

Node = torch.fx.Node
_MATMULS = ("mm", "bmm", "matmul", "baddbmm", "addmm")
_CASTS = ("to", "_to_copy", "type_as")


def _describe(x: object, g: AtenGraph) -> str:
    if isinstance(x, Node):
        steps = [f"{opname(a)}{a.args[1:]}{sorted(a.kwargs.items())}" for a in g.chain(x)]
        return f"T{AtenGraph.shape(g.root(x))}" + "".join(steps)
    if isinstance(x, list | tuple):
        return "[" + ",".join(_describe(v, g) for v in x) + "]"
    return repr(x)


def _leaf_name(g: AtenGraph, node: Node) -> str | None:
    ph = g.placeholder(node)
    if ph is None:
        return None
    return {"param": ph.target, "buffer": BUFFER + ph.target,
            "positions": POSITIONS}.get(ph.kind)


def _static_plan(g: AtenGraph, x: Node, where: str) -> tuple[list[Node], list[Node]]:
    """(the ops computing static ``x``, in graph order; the placeholders they read)."""
    ops: set[Node] = set()
    leaves: set[Node] = set()
    todo = [x]
    while todo:
        n = todo.pop()
        if n in ops or n in leaves:
            continue
        if n.op == "placeholder":
            if _leaf_name(g, n) is None:
                raise ModelError(f"an op (module {where or '<root>'!r}) reads a value computed "
                                 f"from {n.name}, which autosched cannot recompute on the host")
            leaves.add(n)
            continue
        ops.add(n)
        todo.extend(n.all_input_nodes)
    order = {n: i for i, n in enumerate(g.graph.nodes)}
    return sorted(ops, key=order.get), sorted(leaves, key=order.get)


def _sub(x: object, env: dict) -> object:
    if isinstance(x, Node):
        return env[x]
    if isinstance(x, list | tuple):
        return type(x)(_sub(v, env) for v in x)
    if isinstance(x, torch.device):
        return torch.device("cpu")
    return x


def _replay(ops: list[Node], env: dict) -> None:
    """Run the static ``ops`` on the values of ``env`` (float values stay float32)."""
    for n in ops:
        args = _sub(n.args, env)
        kwargs = {k: _sub(v, env) for k, v in n.kwargs.items()}
        if opname(n) in _CASTS and args[0].is_floating_point() and \
                n.meta["val"].dtype.is_floating_point:
            env[n] = args[0]
            continue
        if "device" in kwargs:
            kwargs["device"] = torch.device("cpu")
        env[n] = n.target(*args, **kwargs)


def _callable(g: AtenGraph, node: Node, tensors: list[Node], leaves: list[Node],
              ops: list[Node], target: Node) -> Callable[..., np.ndarray]:
    roots = [g.root(t) for t in tensors]

    def run(*arrays: np.ndarray) -> np.ndarray:
        env: dict = {}
        acts, consts = arrays[:len(tensors)], arrays[len(tensors):]
        for leaf, a in zip(leaves, consts, strict=True):
            want = leaf.meta["val"]
            dt = torch.float32 if want.dtype.is_floating_point else want.dtype
            env[leaf] = torch.from_numpy(np.asarray(a, np.float32).reshape(
                AtenGraph.shape(leaf))).to(dt)
        _replay(ops, env)
        for t, r, a in zip(tensors, roots, acts, strict=True):
            base = torch.from_numpy(np.asarray(a, np.float32).reshape(AtenGraph.shape(r)))
            env[t] = replay_aliases(g.chain(t), base)
        with torch.no_grad():
            out = target.target(*_sub(target.args, env),
                                **{k: _sub(v, env) for k, v in target.kwargs.items()})
        if target is not node:  # one output of a multi-output op
            out = out[node.args[1]]
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
    target = node
    src = node.args[0] if opname(node) == "getitem" else None
    if isinstance(src, Node) and not isinstance(src.meta.get("val"), torch.Tensor):
        target = src  # an output of a multi-output op: run the op, keep that output
    args = _flat([*target.args, *target.kwargs.values()])
    acts = [a for a in args if a in g.active]
    params = [a for a in args if a not in g.active and g.param(a) is not None]
    static = [a for a in args if a not in g.active and g.param(a) is None]
    ops: list[Node] = []
    leaves: list[Node] = list(dict.fromkeys(g.root(p) for p in params))
    for s in static:
        more_ops, more_leaves = _static_plan(g, s, where)
        ops += [n for n in more_ops if n not in ops]
        leaves += [n for n in more_leaves if n not in leaves]
    for p in params:  # parameters through their aliases
        ops += [a for a in g.chain(p) if a not in ops]
    order = {n: i for i, n in enumerate(g.graph.nodes)}
    ops.sort(key=order.get)
    shape = AtenGraph.shape(node)
    n = shape[-1] if shape else 1
    m = max(math.prod(shape) // max(n, 1), 1)
    # the structure only: which parameter a constant is, is bound by name at run time
    plan = ";".join(f"{opname(o)}{_describe(list(o.args), g)}{sorted(o.kwargs.items())}"
                    for o in ops) + "|" + ",".join(
        f"{g.placeholder(x).kind}{AtenGraph.shape(x)}" for x in leaves)
    pick = f"[{node.args[1]}]" if target is not node else ""
    desc = (f"{target.target}{pick}|{_describe(list(target.args), g)}|"
            f"{sorted(target.kwargs.items())}|{plan}")
    key = f"{opname(target)}-{hashlib.sha256(desc.encode()).hexdigest()[:10]}"
    register_extern(key, _callable(g, node, acts, leaves, ops, target))
    ins = ",".join(("x".join(map(str, AtenGraph.shape(g.root(a)))) or "1") for a in acts)
    pshapes = ",".join(("x".join(map(str, AtenGraph.shape(p))) or "1") for p in leaves)
    flops = m * n
    if opname(target) in _MATMULS:
        flops = 2 * m * n * AtenGraph.shape(g.root(acts[0]))[-1] if acts else flops
    attrs = {"fn": key, "ins": ins, "params": pshapes, "flops": flops}
    return Match(Kind.OP, "extern", node, [g.root(a) for a in acts], dict(m=m, n=n), attrs,
                 {f"p{i}": _leaf_name(g, p) for i, p in enumerate(leaves)}, {node},
                 extra={"op": str(target.target), "where": where})


def table_fn(g: AtenGraph, cos: Node, sin: Node) -> tuple[str, list[str]]:
    """A rotary's ``cos`` and ``sin`` as the model computes them: the key of a callable
    (registered like an extern op's) that recomputes both from their leaves (module
    buffers, the step's positions), and the leaves' constant names in the order it reads
    them. The callable returns ``[rows, 2 r]``: cos | sin per row."""
    cos, sin = g.root(cos), g.root(sin)
    ops_c, leaves_c = _static_plan(g, cos, "rotary")
    ops_s, leaves_s = _static_plan(g, sin, "rotary")
    order = {n: i for i, n in enumerate(g.graph.nodes)}
    ops = sorted(set(ops_c) | set(ops_s), key=order.get)
    leaves = sorted(set(leaves_c) | set(leaves_s), key=order.get)

    def run(*consts: np.ndarray) -> np.ndarray:
        env: dict = {}
        for leaf, a in zip(leaves, consts, strict=True):
            want = leaf.meta["val"]
            dt = torch.float32 if want.dtype.is_floating_point else want.dtype
            flat = np.asarray(a, np.float32).reshape(-1)[:math.prod(AtenGraph.shape(leaf))]
            env[leaf] = torch.from_numpy(flat.reshape(AtenGraph.shape(leaf))).to(dt)
        _replay(ops, env)
        c, s = env[cos].float(), env[sin].float()
        r = c.shape[-1]
        return torch.cat([c.reshape(-1, r), s.reshape(-1, r)], dim=1).numpy()

    plan = ";".join(f"{opname(o)}{_describe(list(o.args), g)}{sorted(o.kwargs.items())}"
                    for o in ops) + "|" + ",".join(
        f"{g.placeholder(x).kind}{AtenGraph.shape(x)}" for x in leaves) + \
        f"|{ops.index(cos) if cos in ops else -1},{ops.index(sin) if sin in ops else -1}"
    key = f"rope_tables-{hashlib.sha256(plan.encode()).hexdigest()[:10]}"
    register_extern(key, run)
    return key, [str(_leaf_name(g, x)) for x in leaves]


def tables_of(key: str, consts: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(cos, sin) ``[rows, r]`` from the callable :func:`table_fn` registered as ``key``."""
    from sim.host_ops import EXTERNS

    both = np.asarray(EXTERNS[key](*consts), np.float32)
    r = both.shape[1] // 2
    return both[:, :r], both[:, r:]
