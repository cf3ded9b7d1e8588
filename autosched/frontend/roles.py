"""Matches -> operator nodes: workloads, inputs, and each node's role and decoder layer,
found from the structure around every attention, not from module names.

Layer ``i`` is the ``i``-th attention. From it: the linears its q, k and v are computed
from are ``q_proj``, ``k_proj``, ``v_proj`` (through views, slices and rotary; one linear
for all three is ``qkv_packed``), a norm right before the rotary ``q_norm``/``k_norm``,
the norm feeding the projections (through a scale such as Gemma's ``1 + w``)
``attn_norm``; the linear reading the attention ``o_proj``, a norm after it
``attn_post_norm``, the residual add ``attn_residual``, the norm reading that
``ffn_norm`` (or, when attention and MLP read one input, the other norm of that input;
or ``attn_norm`` itself for a parallel block; or, with post-norms only, the residual sum
itself). Of the linears reading ``ffn_norm``, one
followed by an activation (``ffn_silu``, or ``ffn_act`` for any other) then a product is
``ffn_gate`` (the product ``ffn_mul``, the other linear ``ffn_up``); one followed by an
activation alone is ``ffn_up`` (``fc1``); the linear after them ``ffn_down``, a norm
after it ``ffn_post_norm``, the add ``ffn_residual``. Outside the layers: ``embed``,
``final_norm``, ``lm_head``, ``next_token``, and ``logits`` for what the next token is
chosen from when it is computed after the LM head (scaled, soft-capped). The rotary
operator of q | k is ``qk_rotary``, one of one tensor ``rotary``. A structure that does
not fit leaves its nodes unnamed (role: a host op's name or function, else its kind:
``linear``, ``norm``, ``pointwise``...). Nodes are named ``l{layer}.{role}`` (or the
role), ``#2``... when a name repeats.
"""

from __future__ import annotations

import torch

from autosched.ir import OpNode
from search_spaces.workload import Workload

from .aten import AtenGraph
from .config import ModelError
from .match import Kind, Match

__all__ = ["to_nodes"]


_PASS = ("mul", "add", "sub", "div", "getitem", "slice", "split", "split_with_sizes",
         "chunk", "cat", "select", "neg", "pow", "mean", "rsqrt", "unbind", "stack", "scale",
         "softcap")


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

    def fam(self, i: int) -> Kind:
        return self.m[i].kind

    def fn(self, i: int) -> str:
        """The element-wise function or host op name of ``i`` ("" for other families)."""
        return str(self.m[i].attrs.get("fn", "")).split("-")[0]

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
        return self.one(i, lambda u: self.fn(u) == "add")

    def is_act(self, i: int) -> bool:
        """An activation: element-wise or host, one input, not arithmetic or a view."""
        return self.fam(i) in (Kind.POINTWISE, Kind.OP) and len(self.inputs[i]) == 1 and \
            self.fn(i) not in _PASS

    def passes(self, i: int) -> bool:
        """A host op of one input, or a constant scale: a value carried on, scaled."""
        return len(self.inputs[i]) == 1 and (self.fam(i) is Kind.OP or self.fn(i) == "scale")

    def scaled(self, i: int) -> int:
        """``i`` followed through ops of one input (a constant scale, ``x * (1 + w)``)."""
        while len(self.users[i]) == 1 and self.passes(self.users[i][0]):
            i = self.users[i][0]
        return i

    def norm_before(self, i: int) -> int | None:
        """The norm whose (scaled) result ``i`` reads, else None."""
        j = self.inputs[i][0] if self.inputs[i] else None
        while j is not None and self.passes(j):
            j = self.inputs[j][0]
        return j if j is not None and self.fam(j) is Kind.NORM else None

    def linear_of(self, i: int | None) -> int | None:
        """The one linear that ``i`` is computed from (through views, slices, rotary),
        else None."""
        seen, todo, found = set(), [i] if i is not None else [], set()
        while todo:
            j = todo.pop()
            if j in seen:
                continue
            seen.add(j)
            if self.fam(j) is Kind.LINEAR:
                found.add(j)
            elif self.fam(j) in (Kind.OP, Kind.POINTWISE, Kind.ROTARY, Kind.NORM):
                todo.extend(self.inputs[j])
        return found.pop() if len(found) == 1 else None

    def after(self, lin: int | None, i: int, what: str) -> int | None:
        """The residual add reached from ``lin`` (``o_proj``/``ffn_down``), naming a
        post-norm on the way ``{what}_post_norm``."""
        if lin is None:
            return None
        j = self.scaled(lin)
        post = self.one(j, lambda u: self.fam(u) is Kind.NORM)
        if post is not None and len(self.users[j]) == 1:
            self.set(post, f"{what}_post_norm", i)
            j = self.scaled(post)
        return self.add_of(j)

    def layer_roles(self, a: int, i: int) -> None:
        m, ins = self.m[a], self.inputs[a]
        rope = m.extra.get("qk_rotary")
        self.set(a, "attn", i)
        if rope is not None:
            r = self.m.index(rope)
            self.set(r, "qk_rotary", i)
            q, k = self.inputs[r][:2]
        else:
            q, k = ins[0], ins[1 if len(ins) > 2 else 0]
        v = ins[-1]
        lins = []
        for node, what in ((q, "q"), (k, "k"), (v, "v")):
            if self.fam(node) is Kind.NORM and what != "v":
                self.set(node, f"{what}_norm", i)
                node = self.inputs[node][0] if self.inputs[node] else node
            lins.append(self.linear_of(node))
        if lins[0] is not None and lins.count(lins[0]) == 3:  # one weight for q | k | v
            self.set(lins[0], "qkv_packed", i)
        else:
            for node, role in zip(lins, ("q_proj", "k_proj", "v_proj"), strict=True):
                self.set(node, role, i)
        anorm = self.norm_before(lins[0]) if lins[0] is not None else None
        self.set(anorm, "attn_norm", i)
        o = self.one(a, lambda u: self.fam(u) is Kind.LINEAR)
        self.set(o, "o_proj", i)
        res = self.after(o, i, "attn")
        self.set(res, "attn_residual", i)
        if anorm is not None and any(self.fam(u) is Kind.LINEAR and u not in lins
                                     for u in self.users[self.scaled(anorm)]):
            self.mlp_roles(anorm, i)  # attention and MLP read one norm (parallel)
            return
        src = self.inputs[anorm][0] if anorm is not None and self.inputs[anorm] else None
        fnorm = self.one(res, lambda u: self.fam(u) is Kind.NORM) if res is not None else None
        if src is not None and (fnorm is None or self.role.get(fnorm)):
            fnorm = next((u for u in self.users[src] if self.fam(u) is Kind.NORM
                          and u != anorm and u not in self.role), None)  # two norms, one input
        if fnorm is None and res is not None and any(
                self.fam(u) is Kind.LINEAR for u in self.users[res]):
            self.mlp_roles(res, i)  # post-norms only (OLMo 2, EXAONE 4): the MLP reads the sum
            return
        self.set(fnorm, "ffn_norm", i)
        self.mlp_roles(fnorm, i)

    def mlp_roles(self, fnorm: int | None, i: int) -> None:
        if fnorm is None:
            return
        lins = [u for u in self.users[self.scaled(fnorm)] if self.fam(u) is Kind.LINEAR
                and u not in self.role]
        last = None
        for lin in lins:
            act = self.users[lin][0] if len(self.users[lin]) == 1 else None
            if act is None or not self.is_act(act):
                continue
            role = "ffn_silu" if self.fn(act) == "silu" else "ffn_act"
            mul = self.one(act, lambda u: self.fn(u) == "mul")
            if mul is not None and len(self.inputs[mul]) == 2:  # act(gate) * up
                self.set(lin, "ffn_gate", i)
                self.set(act, role, i)
                self.set(mul, "ffn_mul", i)
                last = mul
            else:  # fc1 -> act -> fc2
                self.set(lin, "ffn_up", i)
                self.set(act, role, i)
                last = act
            break
        for u in lins:
            self.set(u, "ffn_up", i)
        down = self.one(last, lambda u: self.fam(u) is Kind.LINEAR) if last is not None else None
        self.set(down, "ffn_down", i)
        self.set(self.after(down, i, "ffn"), "ffn_residual", i)


def _workload(m: Match, dtype: str) -> Workload:
    return Workload.make(m.op, dtype, m.attrs or None, **m.dims)


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
                raise ModelError(f"{m.op} operator reads {x.name}, which no operator of "
                                 "the captured graph produces")
            if prod[x] not in ins or m.kind is Kind.OP:
                ins.append(prod[x])
        inputs.append(ins)
    w = _Walk(matches, inputs)
    attns = [i for i, m in enumerate(matches) if m.kind is Kind.ATTENTION]
    for layer, a in enumerate(attns):
        w.layer_roles(a, layer)
    for i, m in enumerate(matches):  # a mixture of experts in place of the MLP
        if m.kind is Kind.EXPERTS and inputs[i] and inputs[i][0] in w.layer:
            layer = w.layer[inputs[i][0]]
            w.set(i, "experts", layer)
            w.set(w.after(i, layer, "ffn"), "ffn_residual", layer)
    for i, m in enumerate(matches):
        if m.kind is Kind.LOOKUP:
            w.set(i, "embed", None)
        elif m.kind is Kind.SELECT:
            w.set(i, "next_token", None)
            head = inputs[i][0] if inputs[i] else None
            if head is not None and w.fam(head) is Kind.LINEAR:
                w.set(head, "lm_head", None)
                if inputs[head] and w.fam(inputs[head][0]) is Kind.NORM:
                    w.set(inputs[head][0], "final_norm", None)
    for i, m in enumerate(matches):  # logits computed after the LM head (scaled, capped)
        if m.kind is Kind.SELECT and inputs[i] and i in w.role and inputs[i][0] not in w.role:
            w.set(inputs[i][0], "logits", None)
    last_linear = max((i for i, m in enumerate(matches) if m.kind is Kind.LINEAR),
                      default=None)
    if last_linear is not None and last_linear not in w.role:  # logits without an argmax
        w.set(last_linear, "lm_head", None)
        if inputs[last_linear] and w.fam(inputs[last_linear][0]) is Kind.NORM:
            w.set(inputs[last_linear][0], "final_norm", None)
    names: list[str] = []
    nodes: list[OpNode] = []
    for i, m in enumerate(matches):
        layer = w.layer.get(i)
        if i not in w.role and inputs[i]:  # unnamed node: the layer of what it reads
            layer = next((w.layer[j] for j in inputs[i] if j in w.layer), None)
            if layer is not None:
                w.layer[i] = layer
        role = w.role.get(i) or (m.attrs["fn"].split("-")[0] if m.kind is Kind.OP else
                                 "rotary" if m.kind is Kind.ROTARY else m.kind.name.lower())
        base = role if layer is None else f"l{layer}.{role}"
        name, k = base, 2
        while name in names:
            name, k = f"{base}#{k}", k + 1
        names.append(name)
        params = dict(m.params)
        if "rotary" in m.extra:
            params["rotary"] = m.extra["rotary"]
        if m.extra.get("rotary_kind"):
            params["rotary_kind"] = m.extra["rotary_kind"]
        nodes.append(OpNode(name, _workload(m, dtype), tuple(names[j] for j in inputs[i]),
                            layer, role, tuple(sorted(params.items()))))
    return nodes
