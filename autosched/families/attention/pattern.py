"""The attention family's recogniser: ``scaled_dot_product_attention`` (any backend
variant), or ``softmax(q @ k^T * scale + mask) @ v`` spelled out (with Gemma's logit
soft-capping ``tanh(s / c) * c``); keys and values are traced through the cache writes
(``index_copy``, ``index_put``, ``copy_``, ``roll``, ``cat``, and the slice of the last
positions a sliding window keeps of a longer prompt) to the new tokens', and a
leftover write of new keys or values joins its attention (:func:`absorb_write`).
"""

from __future__ import annotations

import math

import torch

from autosched.frontend.aten import AtenGraph, opname
from autosched.frontend.match import Kind, Match, args, numel, scalar

__all__ = ["absorb_write", "attention", "cache_tensor", "new_values"]

Node = torch.fx.Node

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
        src = node.args[1]
        if _kept_positions(g, src, node):  # the last positions a sliding window keeps
            seen.add(src)
            src = src.args[0]
        return new_values(g, src, seen)
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


def _kept_positions(g: AtenGraph, src: object, copy: Node) -> bool:
    """Whether ``src``, copied by ``copy``, is a slice of the positions axis (second from
    last of a cache layout) that only this copy reads: a window's cache keeping the last
    positions of a longer prompt (a slice of heads, as Falcon takes its keys, is not)."""
    if not isinstance(src, Node) or opname(src) != "slice" or g.users[src] != [copy]:
        return False
    rank = len(g.shape(src))
    dim = src.args[1] if len(src.args) > 1 else 0
    return rank == 4 and isinstance(dim, int) and dim % rank == rank - 2


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
    kvh = numel(kn[0]) // (b * s * d)
    if kvh <= 0 or h % kvh or numel(kn[0]) != b * s * kvh * d:
        return None
    length = g.shape(k)[-2]
    attrs = {} if scale is None or math.isclose(scale, d ** -0.5, rel_tol=1e-6) \
        else {"scale": float(scale)}
    return Match(Kind.ATTENTION, "attention", out, [g.root(q), g.root(kn[0]), g.root(vn[0])],
                 dict(b=b, q=s, h=h, kvh=kvh, d=d, l=length), attrs, nodes=claimed | {out},
                 extra={"kv_len": length, "mask": mask, "causal": causal, "k_new": kn[0],
                        "writes": {n for n in claimed if opname(n) in _WRITE_OPS},
                        "v_new": vn[0], "k_cache": cache_tensor(g, k),
                        "v_cache": cache_tensor(g, v)})


def attention(g: AtenGraph, node: Node) -> Match | None:
    name = opname(node)
    if name in _SDPA:
        q, k, v, scale, mask, causal = args(node, "query", "key", "value", "scale",
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
    if opname(s) in ("mul", "div") and scalar(s.args[1]) is not None:
        claimed.add(s)
        scale = scalar(s.args[1]) if opname(s) == "mul" else 1.0 / scalar(s.args[1])
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
    if opname(s) != "mul" or scalar(s.args[1]) is None:
        return None
    t = g.root(s.args[0])
    if opname(t) != "tanh":
        return None
    d = g.root(t.args[0])
    cap = scalar(s.args[1])
    if opname(d) == "div" and scalar(d.args[1]) == cap:
        return cap
    if opname(d) == "mul" and scalar(d.args[1]) is not None and \
            math.isclose(scalar(d.args[1]) * cap, 1.0, rel_tol=1e-6):
        return cap
    return None


def absorb_write(g: AtenGraph, node: Node, matches: list[Match]) -> bool:
    """A leftover write of new keys or values into a cache joins its attention."""
    seen: set[Node] = set()
    vals = new_values(g, node, seen)
    if vals == [node]:  # not a write: the value itself
        return False
    for a in (m for m in matches if m.kind is Kind.ATTENTION):
        if vals and all(v in a.ins[1:] for v in vals):
            a.nodes |= seen | {node}
            return True
    return False
