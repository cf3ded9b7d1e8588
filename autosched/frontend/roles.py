"""Matches -> operator nodes: workloads, inputs, and each node's role and decoder layer,
found from the structure around every attention, not from module names.

Layer ``i`` is the ``i``-th attention. From it: the rotary operator's inputs are
``q_proj`` and ``k_proj``, the value producer ``v_proj``, the norm feeding ``q_proj``
``attn_norm``; the linear reading the attention ``o_proj``, the add after it
``attn_residual``, the norm reading that ``ffn_norm``; of the linears reading
``ffn_norm`` the one whose result goes through an activation is ``ffn_gate``
(activation ``ffn_silu``, or ``ffn_act`` for any other), the other ``ffn_up``; their
product ``ffn_mul``, the linear reading it ``ffn_down``, the add after it
``ffn_residual``. Outside the layers: ``embed``, ``final_norm``, ``lm_head``, ``argmax``.
Nodes are named ``l{layer}.{role}`` (or the role), ``#2``... when a name repeats.
"""

from __future__ import annotations

import torch

from autosched.ir import OpNode
from search_spaces.workload import Workload

from .aten import AtenGraph
from .config import ModelError
from .patterns import Match

__all__ = ["GEMV_MAX_M", "to_nodes"]

GEMV_MAX_M = 8
_NORMS = ("rmsnorm", "layernorm")


class _Walk:
    def __init__(self, matches: list[Match], inputs: list[list[int]]) -> None:
        self.m, self.inputs = matches, inputs
        self.users: list[list[int]] = [[] for _ in matches]
        for i, ins in enumerate(inputs):
            for j in ins:
                if i not in self.users[j]:
                    self.users[j].append(i)
        self.role: dict[int, str] = {}
        self.layer: dict[int, int] = {}

    def fam(self, i: int) -> str:
        return self.m[i].family

    def set(self, i: int | None, role: str, layer: int | None) -> None:
        if i is not None and i not in self.role:
            self.role[i] = role
            if layer is not None:
                self.layer[i] = layer

    def one(self, i: int | None, pred) -> int | None:
        if i is None:
            return None
        found = [u for u in self.users[i] if pred(u)]
        return found[0] if len(found) == 1 else None

    def add_of(self, i: int | None) -> int | None:
        return self.one(i, lambda u: self.m[u].attrs.get("fn") == "add")

    def layer_roles(self, a: int, i: int) -> None:
        m, ins = self.m[a], self.inputs[a]
        rope = m.extra.get("rope")
        self.set(a, "attn", i)
        if rope is not None:
            r = self.m.index(rope)
            self.set(r, "rope", i)
            q, k = self.inputs[r][:2]
        else:
            q, k = ins[0], ins[1 if len(ins) > 2 else 0]
        v = ins[-1]
        for node, role in ((q, "q_proj"), (k, "k_proj"), (v, "v_proj")):
            self.set(node, role, i)
        if self.inputs[q] and self.fam(self.inputs[q][0]) in _NORMS:
            self.set(self.inputs[q][0], "attn_norm", i)
        o = self.one(a, lambda u: self.fam(u) == "linear")
        self.set(o, "o_proj", i)
        res = self.add_of(o)
        self.set(res, "attn_residual", i)
        fnorm = self.one(res, lambda u: self.fam(u) in _NORMS) if res is not None else None
        self.set(fnorm, "ffn_norm", i)
        self.mlp_roles(fnorm, i)

    def mlp_roles(self, fnorm: int | None, i: int) -> None:
        if fnorm is None:
            return
        lins = [u for u in self.users[fnorm] if self.fam(u) == "linear"]
        gate = next((u for u in lins if any(self.fam(x) in ("elementwise", "extern")
                                            and self.m[x].attrs.get("fn") not in ("mul", "add")
                                            for x in self.users[u])), None)
        act = None
        if gate is not None:
            self.set(gate, "ffn_gate", i)
            act = next(x for x in self.users[gate] if self.m[x].attrs.get("fn") not in
                       ("mul", "add"))
            self.set(act, "ffn_silu" if self.m[act].attrs.get("fn") == "silu" else "ffn_act", i)
        for u in lins:
            self.set(u, "ffn_up", i)
        mul = self.one(act, lambda u: self.m[u].attrs.get("fn") == "mul") \
            if act is not None else None
        self.set(mul, "ffn_mul", i)
        last = mul if mul is not None else act
        down = self.one(last, lambda u: self.fam(u) == "linear") if last is not None else None
        self.set(down, "ffn_down", i)
        self.set(self.add_of(down), "ffn_residual", i)


def _workload(m: Match, dtype: str) -> Workload:
    fam = m.family
    if fam == "linear":
        fam = "gemv" if m.dims["m"] <= GEMV_MAX_M else "gemm"
    return Workload.make(fam, dtype, m.attrs or None, **m.dims)


def to_nodes(g: AtenGraph, matches: list[Match], dtype: str) -> list[OpNode]:
    """The operator nodes of ``matches`` (in graph order), named by role and layer."""
    prod: dict[torch.fx.Node, int] = {}
    for i, m in enumerate(matches):
        prod[m.out] = i
        for k in ("q_out", "k_out"):
            if k in m.extra:
                prod[m.extra[k]] = i
    inputs: list[list[int]] = []
    for m in matches:
        ins: list[int] = []
        for x in m.ins:
            ph = g.placeholder(x)
            if ph is not None and ph.kind == "ids":
                continue
            if x not in prod:
                raise ModelError(f"{m.family} operator reads {x.name}, which no operator of "
                                 "the captured graph produces")
            if prod[x] not in ins or m.family == "extern":
                ins.append(prod[x])
        inputs.append(ins)
    w = _Walk(matches, inputs)
    attns = [i for i, m in enumerate(matches) if m.family == "attention"]
    for layer, a in enumerate(attns):
        w.layer_roles(a, layer)
    for i, m in enumerate(matches):
        if m.family == "embedding":
            w.set(i, "embed", None)
        elif m.family == "argmax":
            w.set(i, "argmax", None)
            head = inputs[i][0] if inputs[i] else None
            if head is not None and w.fam(head) == "linear":
                w.set(head, "lm_head", None)
                if inputs[head] and w.fam(inputs[head][0]) in _NORMS:
                    w.set(inputs[head][0], "final_norm", None)
    last_linear = max((i for i, m in enumerate(matches) if m.family == "linear"), default=None)
    if last_linear is not None and last_linear not in w.role:  # logits without an argmax
        w.set(last_linear, "lm_head", None)
        if inputs[last_linear] and w.fam(inputs[last_linear][0]) in _NORMS:
            w.set(inputs[last_linear][0], "final_norm", None)
    names: list[str] = []
    nodes: list[OpNode] = []
    for i, m in enumerate(matches):
        layer = w.layer.get(i)
        if i not in w.role and inputs[i]:  # unnamed node: the layer of what it reads
            layer = next((w.layer[j] for j in inputs[i] if j in w.layer), None)
        role = w.role.get(i) or (m.attrs["fn"].split("-")[0] if m.family == "extern"
                                 else m.family)
        base = role if layer is None else f"l{layer}.{role}"
        name, k = base, 2
        while name in names:
            name, k = f"{base}#{k}", k + 1
        names.append(name)
        params = dict(m.params)
        if "rotary" in m.extra:
            params["rotary"] = m.extra["rotary"]
        nodes.append(OpNode(name, _workload(m, dtype), tuple(names[j] for j in inputs[i]),
                            layer, role, tuple(sorted(params.items()))))
    return nodes
