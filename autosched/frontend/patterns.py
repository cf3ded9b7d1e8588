"""Recognisers: one function per operator family, each anchored at the op that produces
the family's result, however the module spells the computation.

A recogniser returns a :class:`Match` (family, the node computing the result, the
activation inputs in the kernel's operand order, dims, attrs, the parameters it reads by
local name, and every activation node it claims) or None. Recognised spellings:

* linear: ``linear``; ``mm``/``addmm``/``matmul`` against a transposed parameter.
* RMSNorm: ``rms_norm``; ``x * rsqrt(mean(x^2) + eps)`` (``x*x`` or ``pow``), then an
  optional weight multiply. LayerNorm: ``layer_norm``, ``native_layer_norm``, or
  ``(x - mean) * rsqrt(var + eps) * w + b`` spelled out.
* rotary: ``x * cos + rotate_half(x) * sin`` with ``cos``/``sin`` position-only values and
  ``rotate_half(x) = cat(-x[..., d/2:], x[..., :d/2])``.
* attention: ``scaled_dot_product_attention`` (any backend variant), or
  ``softmax(q @ k^T * scale + mask) @ v``; keys and values traced through the cache
  writes (``index_copy``, ``index_put``, ``copy_``, ``roll``, ``cat``) to the new tokens'.
* ``embedding``, ``argmax``, and element-wise ``silu`` (or ``x * sigmoid(x)``), ``mul``
  and ``add`` of two activations of one shape.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch

from .aten import AtenGraph, opname

__all__ = ["RECOGNISERS", "Match", "new_values"]

Node = torch.fx.Node


@dataclass
class Match:
    """One operator found in the graph (see the module docstring)."""

    family: str
    out: Node
    ins: list[Node]
    dims: dict[str, int]
    attrs: dict[str, Any] = field(default_factory=dict)
    params: dict[str, str] = field(default_factory=dict)
    nodes: set[Node] = field(default_factory=set)
    extra: dict[str, Any] = field(default_factory=dict)


def _args(node: Node, *names: str) -> list[Any]:
    """Positional-or-keyword arguments of ``node`` by name (None when absent)."""
    schema = getattr(node.target, "_schema", None)
    order = [a.name for a in schema.arguments] if schema is not None else []
    out = []
    for i, name in enumerate(names):
        j = order.index(name) if name in order else i
        out.append(node.args[j] if j < len(node.args) else node.kwargs.get(name))
    return out


def _numel(node: Node) -> int:
    return math.prod(AtenGraph.shape(node))


def _rows(node: Node) -> tuple[int, int]:
    shape = AtenGraph.shape(node)
    n = shape[-1] if shape else 1
    return max(math.prod(shape) // max(n, 1), 1), n


def _scalar(x: Any) -> float | None:
    return float(x) if isinstance(x, int | float) and not isinstance(x, bool) else None


# ---- linear, embedding, argmax, element-wise ----------------------------------------
def linear(g: AtenGraph, node: Node) -> Match | None:
    name = opname(node)
    if name == "linear":
        x, w, b = _args(node, "input", "weight", "bias")
        wname = g.param(w)
    elif name in ("mm", "matmul"):
        x, wt = node.args[:2]
        b, wname = None, g.transposed_param(wt)
    elif name == "addmm":
        b, x, wt = node.args[:3]
        wname = g.transposed_param(wt)
    else:
        return None
    if wname is None or not isinstance(x, Node) or x not in g.active:
        return None
    params = {"W": wname}
    if b is not None:
        if g.param(b) is None:
            return None
        params["b"] = g.param(b)
    m, n = _rows(node)
    k = _numel(x) // m
    attrs = {"bias": 1} if b is not None else {}
    return Match("linear", node, [g.root(x)], dict(m=m, n=n, k=k), attrs, params, {node})


def embedding(g: AtenGraph, node: Node) -> Match | None:
    if opname(node) != "embedding" or g.param(node.args[0]) is None:
        return None
    table = g.shape(g.root(node.args[0]))
    ids = node.args[1]
    return Match("embedding", node, [g.root(ids)], dict(m=_numel(ids), n=table[1], v=table[0]),
                 params={"table": g.param(node.args[0])}, nodes={node})


def argmax(g: AtenGraph, node: Node) -> Match | None:
    if opname(node) != "argmax":
        return None
    x = node.args[0]
    dim = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim")
    if dim is None or dim % len(g.shape(x)) != len(g.shape(x)) - 1:
        return None
    m, n = _rows(x)
    return Match("argmax", node, [g.root(x)], dict(m=m, n=n), nodes={node})


def elementwise(g: AtenGraph, node: Node) -> Match | None:
    name, args = opname(node), node.args
    if name not in ("silu", "add", "mul"):
        return None
    m, n = _rows(node)
    dims = dict(m=m, n=n)
    if name == "silu":
        return Match("elementwise", node, [g.root(args[0])], dims, {"fn": "silu"}, nodes={node})
    if name not in ("add", "mul") or len(args) < 2:
        return None
    a, b = args[:2]
    if not all(isinstance(v, Node) and v in g.active and _numel(v) == _numel(node)
               for v in (a, b)):
        return None
    if name == "add" and node.kwargs.get("alpha", 1) != 1:
        return None
    if name == "mul":  # x * sigmoid(x) is SiLU
        for x, s in ((a, b), (b, a)):
            if opname(s) == "sigmoid" and g.root(s.args[0]) is g.root(x) and \
                    g.users[s] == [node]:
                return Match("elementwise", node, [g.root(x)], dims, {"fn": "silu"},
                             nodes={node, s})
    return Match("elementwise", node, [g.root(a), g.root(b)], dims, {"fn": name}, nodes={node})


# ---- normalisation -------------------------------------------------------------------
def _mean_last(g: AtenGraph, node: object) -> Node | None:
    """The argument of ``mean(arg, -1, keepdim=True)``, else None."""
    node = g.root(node)
    if not isinstance(node, Node) or opname(node) != "mean":
        return None
    dims = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim")
    x = node.args[0]
    rank = len(g.shape(x))
    ok = dims is not None and [d % rank for d in dims] == [rank - 1]
    return x if ok else None


def _square_of(g: AtenGraph, node: object) -> Node | None:
    node = g.root(node)
    if not isinstance(node, Node):
        return None
    if opname(node) == "pow" and node.args[1] == 2:
        return g.root(node.args[0])
    if opname(node) == "mul" and g.root(node.args[0]) is g.root(node.args[1]):
        return g.root(node.args[0])
    if opname(node) == "square":
        return g.root(node.args[0])
    return None


def _affine_tail(g: AtenGraph, node: Node, claimed: set[Node]) -> tuple[Node, dict[str, str]]:
    """Follow ``node`` through ``* weight`` and ``+ bias`` parameter ops (sole users)."""
    params: dict[str, str] = {}
    for local, op in (("w", "mul"), ("b", "add")):
        users = g.alias_users(node)
        if len(users) != 1 or opname(users[0]) != op:
            break
        u = users[0]
        other = [a for a in u.args[:2] if g.root(a) is not node]
        if len(other) != 1 or g.param(other[0]) is None:
            break
        params[local] = g.param(other[0])
        claimed.add(u)
        node = u
    return node, params


def norm(g: AtenGraph, node: Node) -> Match | None:
    """Anchored at ``rsqrt``, ``rms_norm`` or ``layer_norm`` (the result may be later)."""
    name = opname(node)
    if name in ("rms_norm", "layer_norm", "native_layer_norm"):
        m, n = _rows(node if name != "native_layer_norm" else node.args[0])
        x, _, w, b, eps = (_args(node, "input", "normalized_shape", "weight", "bias", "eps")
                           if name != "rms_norm" else
                           [*_args(node, "input", "normalized_shape", "weight"), None,
                            _args(node, "eps")[0]])
        out = node
        if name == "native_layer_norm":
            outs = [u for u in g.users[node] if opname(u) == "getitem" and u.args[1] == 0]
            if len(outs) != 1:
                return None
            out = outs[0]
        params = {k: g.param(v) for k, v in (("w", w), ("b", b)) if v is not None}
        if None in params.values():
            return None
        fam = "rmsnorm" if name == "rms_norm" else "layernorm"
        eps = 1e-6 if eps is None else float(eps)  # torch's rms_norm default: machine eps
        return Match(fam, out, [g.root(x)], dict(m=m, n=n), {"eps": eps}, params,
                     {node, out})
    if name != "rsqrt":
        return None
    arg = g.root(node.args[0])
    if opname(arg) != "add" or _scalar(arg.args[1]) is None:
        return None
    eps, sq = _scalar(arg.args[1]), _mean_last(g, arg.args[0])
    x = _square_of(g, sq) if sq is not None else None
    if x is None:
        return None
    claimed = {node, arg, g.root(arg.args[0]), g.root(sq)}
    centred = None
    if opname(x) == "sub" and _mean_last(g, x.args[1]) is not None and \
            g.root(_mean_last(g, x.args[1])) is g.root(x.args[0]):
        centred, x = x, g.root(x.args[0])
        claimed |= {centred, g.root(centred.args[1])}
    scaled = [u for u in g.alias_users(node) if opname(u) == "mul"
              and {g.root(a) for a in u.args[:2]} == {node, centred or x}]
    if len(scaled) != 1:
        return None
    claimed.add(scaled[0])
    out, params = _affine_tail(g, scaled[0], claimed)
    m, n = _rows(out)
    fam = "layernorm" if centred is not None else "rmsnorm"
    if fam == "layernorm" and set(params) != {"w", "b"}:
        return None
    return Match(fam, out, [x], dict(m=m, n=n), {"eps": eps}, params, claimed | {out})


# ---- rotary embedding ----------------------------------------------------------------
def _rotate_half_of(g: AtenGraph, node: object) -> Node | None:
    node = g.root(node)
    if not isinstance(node, Node) or opname(node) != "cat" or len(node.args[0]) != 2:
        return None
    neg, lo = (g.root(a) for a in node.args[0])
    if opname(neg) != "neg" or opname(lo) != "slice":
        return None
    hi = g.root(neg.args[0])
    if opname(hi) != "slice":
        return None
    x = g.root(lo.args[0])
    d = g.shape(lo.args[0])[-1]
    if g.root(hi.args[0]) is not x or tuple(lo.args[1:4]) != (lo.args[1], 0, d // 2) or \
            hi.args[2] != d // 2 or (lo.args[1] - len(g.shape(lo.args[0]))) % 4 and \
            lo.args[1] != len(g.shape(lo.args[0])) - 1:
        return None
    return x


def rope(g: AtenGraph, node: Node) -> Match | None:
    if opname(node) != "add" or len(node.args) < 2:
        return None
    muls = [g.root(a) for a in node.args[:2]]
    if not all(isinstance(p, Node) and opname(p) == "mul" for p in muls):
        return None
    terms = []
    for p in muls:
        a, b = p.args[:2]
        act, tab = (a, b) if g.is_static(b) else (b, a)
        if not g.is_static(tab):
            return None
        terms.append((act, tab, p))
    for (x, cos, p1), (r, sin, p2) in (terms, terms[::-1]):
        if _rotate_half_of(g, r) is g.root(x):
            cat = g.root(r)
            neg = g.root(cat.args[0][0])
            claimed = {node, p1, p2, cat, neg, g.root(neg.args[0]), g.root(cat.args[0][1])}
            shape = g.shape(x)  # [b, heads, s, d] or [b, s, heads, d]: rows of b * s
            d = shape[-1]  # tokens, ``heads`` each; the tables broadcast over the heads
            tab = g.shape(cos) if len(g.shape(cos)) == len(shape) else ()
            heads = next((shape[i] for i in (1, 2) if len(shape) == 4 and tab
                          and tab[i] == 1), 1)
            return Match("rope", node, [g.root(x)], dict(m=_numel(x) // (d * heads), h=heads,
                                                         d=d),
                         nodes=claimed, extra={"cos": cos, "sin": sin, "x": x})
    return None


# ---- attention -----------------------------------------------------------------------
_WRITES = {"index_copy": 3, "index_copy_": 3, "index_put": 2, "index_put_": 2,
           "slice_scatter": 1, "select_scatter": 1}
_WRITE_OPS = {*_WRITES, "copy", "copy_", "roll", "cat"}


def new_values(g: AtenGraph, node: object, seen: set[Node]) -> list[Node]:
    """Activation values written into the tensor ``node`` (a KV cache read by attention);
    every write op on the way is added to ``seen``."""
    node = g.root(node)
    if not isinstance(node, Node) or node not in g.active:
        return []
    name = opname(node)
    if name in ("copy_", "copy"):
        seen.add(node)
        return new_values(g, node.args[1], seen)
    if name == "roll":
        seen.add(node)
        return new_values(g, node.args[0], seen)
    if name in _WRITES:
        seen.add(node)
        return [*new_values(g, node.args[_WRITES[name]], seen),
                *new_values(g, node.args[0], seen)]
    if name == "cat" and (node.args[1] if len(node.args) > 1 else 0) % len(g.shape(node)) \
            == len(g.shape(node)) - 2:
        seen.add(node)  # positions appended to a cache (not halves of a head joined)
        return [v for a in node.args[0] for v in new_values(g, a, seen)]
    return [node]


_SDPA = ("scaled_dot_product_attention", "_scaled_dot_product_flash_attention_for_cpu",
         "_scaled_dot_product_efficient_attention", "_scaled_dot_product_flash_attention",
         "_scaled_dot_product_attention_math")


def cache_tensor(g: AtenGraph, node: object) -> Node | None:
    """The graph input a KV cache read by attention lives in (first arguments followed
    back to a placeholder), or None when the keys are not cached."""
    while isinstance(node, Node) and node.op != "placeholder":
        node = node.args[0] if node.args else None
    return node


def _attention(g: AtenGraph, out: Node, q: object, k: object, v: object, scale: float | None,
               claimed: set[Node], mask: object = None, causal: bool = False) -> Match | None:
    kn, vn = new_values(g, k, claimed), new_values(g, v, claimed)
    if len(kn) != 1 or len(vn) != 1 or not isinstance(g.root(q), Node):
        return None
    b, h, s, d = g.shape(q)
    kvh = _numel(kn[0]) // (b * s * d)
    if kvh <= 0 or h % kvh or _numel(kn[0]) != b * s * kvh * d:
        return None
    length = g.shape(k)[-2]
    attrs = {} if scale is None or math.isclose(scale, d ** -0.5, rel_tol=1e-6) \
        else {"scale": float(scale)}
    return Match("attention", out, [g.root(q), g.root(kn[0]), g.root(vn[0])],
                 dict(b=b, q=s, h=h, kvh=kvh, d=d, l=length), attrs, nodes=claimed | {out},
                 extra={"kv_len": length, "mask": mask, "causal": causal, "k_new": kn[0],
                        "writes": {n for n in claimed if opname(n) in _WRITE_OPS},
                        "v_new": vn[0], "k_cache": cache_tensor(g, k),
                        "v_cache": cache_tensor(g, v)})


def attention(g: AtenGraph, node: Node) -> Match | None:
    name = opname(node)
    if name in _SDPA:
        q, k, v, scale, mask, causal = _args(node, "query", "key", "value", "scale",
                                             "attn_mask", "is_causal")
        out = node
        if name != "scaled_dot_product_attention":
            outs = [u for u in g.users[node] if opname(u) == "getitem" and u.args[1] == 0]
            if len(outs) != 1:
                return None
            out = outs[0]
        return _attention(g, out, q, k, v, scale, {node, out}, mask, bool(causal))
    if name not in ("matmul", "bmm") or not isinstance(node.args[0], Node):
        return None
    p = g.root(node.args[0])  # softmax(q k^T * scale + mask) @ v
    if opname(p) not in ("softmax", "_softmax", "_safe_softmax"):
        return None
    claimed, s, mask = {node, p}, g.root(p.args[0]), None
    if opname(s) == "add" and g.is_static(s.args[1]):
        claimed.add(s)
        s, mask = g.root(s.args[0]), s.args[1]
    cap = _softcap(g, s)
    if cap is not None:
        claimed |= {s, g.root(s.args[0]), g.root(g.root(s.args[0]).args[0])}
        s = g.root(g.root(g.root(s.args[0]).args[0]).args[0])
    scale = 1.0
    if opname(s) in ("mul", "div") and _scalar(s.args[1]) is not None:
        claimed.add(s)
        scale = _scalar(s.args[1]) if opname(s) == "mul" else 1.0 / _scalar(s.args[1])
        s = g.root(s.args[0])
    if opname(s) not in ("matmul", "bmm"):
        return None
    claimed.add(s)
    kt = s.args[1]
    if not isinstance(kt, Node) or opname(kt) != "transpose":
        return None
    m = _attention(g, node, s.args[0], kt.args[0], node.args[1], scale, claimed, mask)
    if m is not None and cap is not None:
        m.attrs["softcap"] = cap
    return m


def _softcap(g: AtenGraph, s: Node) -> float | None:
    """``c`` when ``s`` is ``tanh(x / c) * c`` (logit soft-capping), else None."""
    if opname(s) != "mul" or _scalar(s.args[1]) is None:
        return None
    t = g.root(s.args[0])
    if opname(t) != "tanh":
        return None
    d = g.root(t.args[0])
    cap = _scalar(s.args[1])
    if opname(d) == "div" and _scalar(d.args[1]) == cap:
        return cap
    if opname(d) == "mul" and _scalar(d.args[1]) is not None and \
            math.isclose(_scalar(d.args[1]) * cap, 1.0, rel_tol=1e-6):
        return cap
    return None


# each tried over the whole graph, from its end backwards, in this order: a recogniser
# claims its nodes before the ones after it see them
RECOGNISERS = (attention, rope, norm, linear, embedding, argmax, elementwise)
