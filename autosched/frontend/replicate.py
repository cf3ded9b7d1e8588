"""Decoder layers of one kind are the same code: capture a few, repeat them.

A deep model is captured with two layers of every attention kind (full, sliding) and
the operator graph is then extended to every layer: layer ``i`` copies a captured layer
of its kind with names, parameter names and inputs moved to ``i``. The copy is refused
(None: capture the whole model) unless the two captured layers of each kind are the same
operators reading their predecessor the same way, and each layer reads exactly one node
outside itself (the residual stream).
"""

from __future__ import annotations

import dataclasses

from autosched.ir import OpNode

__all__ = ["replicate"]


def _split(nodes: list[OpNode], layers: int) -> tuple[list[OpNode], list[list[OpNode]],
                                                     list[OpNode]]:
    pre, post = [], []
    body: list[list[OpNode]] = [[] for _ in range(layers)]
    for n in nodes:
        if n.layer is not None:
            body[n.layer].append(n)
        elif any(b for b in body):
            post.append(n)
        else:
            pre.append(n)
    return pre, body, post


def _local(name: str, layer: int) -> str | None:
    prefix = f"l{layer}."
    return name[len(prefix):] if name.startswith(prefix) else None


def _shape(layer: list[OpNode], j: int, prefix: str) -> tuple | None:
    """The layer's operators with names, inputs and parameters made layer-independent."""
    outside = {i for n in layer for i in n.inputs if _local(i, j) is None}
    if len(outside) != 1:
        return None
    mark = f"{prefix}.{j}."
    return tuple((_local(n.name, j), n.role, n.workload,
                  tuple(_local(i, j) or "<in>" for i in n.inputs),
                  tuple((k, v.replace(mark, f"{prefix}.#.")) for k, v in n.params))
                 for n in layer)


def _move(node: OpNode, j: int, i: int, entry: str, prefix: str) -> OpNode:
    mark, to = f"{prefix}.{j}.", f"{prefix}.{i}."
    return dataclasses.replace(
        node, name=f"l{i}.{_local(node.name, j)}", layer=i,
        inputs=tuple(f"l{i}.{_local(x, j)}" if _local(x, j) is not None else entry
                     for x in node.inputs),
        params=tuple((k, v.replace(mark, to)) for k, v in node.params))


def replicate(nodes: list[OpNode], proto_kinds: list[int], kinds: list[int],
              prefix: str) -> list[OpNode] | None:
    """Extend a graph captured with layers of ``proto_kinds`` to layers of ``kinds``;
    ``prefix`` is the parameter path of the decoder's layer list (``model.layers``)."""
    pre, body, post = _split(nodes, len(proto_kinds))
    shapes = [_shape(layer, j, prefix) for j, layer in enumerate(body)]
    steady: dict[int, int] = {}
    for j, k in enumerate(proto_kinds):
        first = proto_kinds.index(k)
        if shapes[j] is None or shapes[j] != shapes[first]:
            return None
        if j != first and j > 0:
            steady[k] = j
    if kinds[0] != proto_kinds[0] or any(k not in steady for k in kinds[1:]):
        return None
    out = list(pre)
    last = len(proto_kinds) - 1
    exits = {i for n in post for i in n.inputs if _local(i, last) is not None}
    entry = next(iter({i for n in body[0] for i in n.inputs if _local(i, 0) is None}))
    for i, k in enumerate(kinds):
        j = 0 if i == 0 else steady[k]
        template = body[j]
        exit_role = next(iter({x for n in body[j + 1] for x in n.inputs
                               if _local(x, j + 1) is None})) if j < last else \
            next(iter(exits), None)
        out += [_move(n, j, i, entry, prefix) for n in template]
        if exit_role is None:
            return None
        entry = f"l{i}.{_local(exit_role, j)}"
    for n in post:
        out.append(dataclasses.replace(n, inputs=tuple(
            entry if _local(x, last) is not None else x for x in n.inputs)))
    return out
