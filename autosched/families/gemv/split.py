"""A packed linear read in parts: ``qkv`` or ``gate_up`` weights stored as one matrix
(Phi-3, GPT-NeoX, Falcon, GLM) whose output is only ever sliced into column blocks.

The recogniser returns one linear per part, each reading its own rows of the packed
weight (the derived name ``W@r=period:lo:hi``: rows ``lo:hi`` of every block of
``period``, which also covers GPT-NeoX's per-head ``q | k | v`` interleave), so roles
see ``q_proj``, ``k_proj``, ``v_proj`` (``ffn_gate``, ``ffn_up``) and the slices cost
nothing; fusion's ``merge_qkv`` / ``merge_gate_up`` then keep the parts whole again
(rows stacked in q | k | v order) or leave them split: the layout is a searched choice.

A part is a ``slice`` (step 1) or an output of ``split`` / ``chunk`` along a dim of a
view of the linear's ``[tokens, n]`` output whose elements after that dim are contiguous
and whose other dims index whole periods (strides from the traced tensors).
"""

from __future__ import annotations

import math

import torch

from autosched.frontend.aten import AtenGraph, opname
from autosched.frontend.match import Match, numel
from autosched.ir.derived import derived

from .pattern import linear

__all__ = ["packed"]

Node = torch.fx.Node
_SPLITS = ("split", "split_with_sizes", "chunk")


def _period(v: Node, dim: int, n: int) -> tuple[int, int] | None:
    """(period P, elements per index of ``dim``) when indices of ``dim`` of ``v`` (a view
    of a contiguous ``[tokens, n]`` value) pick column blocks of every period of ``n``."""
    val = v.meta.get("val")
    if not isinstance(val, torch.Tensor):
        return None
    shape, stride = tuple(val.shape), tuple(val.stride())
    inner = math.prod(shape[dim + 1:])
    expect = 1
    for i in range(len(shape) - 1, dim, -1):  # contiguous after ``dim``
        if shape[i] > 1 and stride[i] != expect:
            return None
        expect *= shape[i]
    if shape[dim] > 1 and stride[dim] != inner:
        return None
    period = shape[dim] * inner
    if n % period or any(shape[i] > 1 and stride[i] % period for i in range(dim)):
        return None
    return period, inner


def _parts(g: AtenGraph, u: Node, n: int) -> list[tuple[Node, int, int, int, set[Node]]] | None:
    """The parts user ``u`` of the linear takes: (value, period, lo, hi, nodes)."""
    name = opname(u)
    v = u.args[0]
    if not isinstance(v, Node):
        return None
    rank = len(AtenGraph.shape(v))
    if name == "slice":
        a = list(u.args) + [None] * (5 - len(u.args))
        dim = (a[1] or 0) % rank
        size = AtenGraph.shape(v)[dim]
        lo, hi = (0 if a[2] is None else a[2]), (size if a[3] is None else a[3])
        lo, hi = (x + size if x < 0 else min(x, size) for x in (lo, hi))
        found = _period(v, dim, n)
        if found is None or (a[4] or 1) != 1 or not 0 <= lo < hi <= size:
            return None
        p, inner = found
        return [(u, p, lo * inner, hi * inner, {u})]
    if name not in _SPLITS:
        return None
    dim = (u.args[2] if len(u.args) > 2 else u.kwargs.get("dim", 0)) % rank
    size = AtenGraph.shape(v)[dim]
    if name == "chunk":
        step = -(-size // u.args[1])
        sizes = [min(step, size - i) for i in range(0, size, step)]
    elif name == "split" and isinstance(u.args[1], int):
        sizes = [min(u.args[1], size - i) for i in range(0, size, u.args[1])]
    else:
        sizes = list(u.args[1])
    found = _period(v, dim, n)
    outs = g.users[u]
    if found is None or not outs or any(opname(o) != "getitem" for o in outs):
        return None
    p, inner = found
    starts = [sum(sizes[:i]) for i in range(len(sizes))]
    return [(o, p, starts[o.args[1]] * inner, (starts[o.args[1]] + sizes[o.args[1]]) * inner,
             {o}) for o in outs]


def packed(g: AtenGraph, node: Node) -> list[Match] | None:
    """One linear per column block of a linear read only in blocks (module docstring)."""
    base = linear(g, node)
    if base is None:
        return None
    n = base.dims["n"]
    users = g.alias_users(node)
    parts = []
    for u in users:
        found = _parts(g, u, n)
        if found is None:
            return None
        parts += found
        if opname(u) in _SPLITS:
            parts[-1][4].add(u)
    if len(parts) < 2:
        return None
    out = []
    for i, (v, p, lo, hi, nodes) in enumerate(parts):
        params = {k: derived(name, rows=(p, lo, hi)) for k, name in base.params.items()}
        width = numel(v) // base.dims["m"]
        out.append(Match(base.kind, base.op, v, list(base.ins), {**base.dims, "n": width},
                         dict(base.attrs), params, nodes | ({node} if i == 0 else set())))
    return out
