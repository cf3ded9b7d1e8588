"""Recognisers of the point-wise families: ``embedding``, ``argmax``, element-wise
``silu`` (or ``x * sigmoid(x)``), ``mul`` and ``add`` of two activations of one shape,
RMSNorm however spelled, and rotary embedding ``x * cos + rotate_half(x) * sin`` with
position-only ``cos``/``sin`` and ``rotate_half(x) = cat(-x[..., d/2:], x[..., :d/2])``;
the q and k rotations of one attention then merge into one operator
(:func:`merge_ropes`).
"""

from __future__ import annotations

import torch

from autosched.frontend.aten import AtenGraph, opname
from autosched.frontend.match import Kind, Match, numel, rows, scalar
from autosched.frontend.norms import find_norm
from autosched.ir.derived import BUFFER, derived

__all__ = ["activation", "argmax", "elementwise", "embedding", "merge_ropes", "partial_rope",
           "rmsnorm", "rope", "scale"]

Node = torch.fx.Node


def _static_scalar(g: AtenGraph, x: object) -> float | str | None:
    """A multiplier known before the tokens: a number, or a one-element module buffer
    (``buffer:`` + its name; Gemma's embedding scale)."""
    if scalar(x) is not None:
        return scalar(x)
    r = g.root(x)
    ph = g.placeholder(r) if isinstance(r, Node) else None
    if ph is not None and ph.kind == "buffer" and numel(r) == 1:
        return BUFFER + ph.target
    return None


def _times_scalar(g: AtenGraph, node: Node) -> tuple[Node, float | str] | None:
    """(x, c) when ``node`` is ``x * c`` or ``x / c`` (c: :func:`_static_scalar`)."""
    name = opname(node)
    if name not in ("mul", "div") or len(node.args) < 2:
        return None
    pairs = [(node.args[0], node.args[1])]
    if name == "mul":
        pairs.append((node.args[1], node.args[0]))
    for x, c in pairs:
        v = _static_scalar(g, c)
        if isinstance(x, Node) and x in g.active and v is not None and numel(x) == numel(node):
            if name == "div":
                if isinstance(v, str) or v == 0:
                    return None
                v = 1.0 / v
            return g.root(x), v
    return None


def embedding(g: AtenGraph, node: Node) -> Match | None:
    """The lookup, and a multiplier of its rows folded into the table (Gemma, Granite)."""
    if opname(node) != "embedding" or g.param(node.args[0]) is None:
        return None
    table = g.shape(g.root(node.args[0]))
    ids = node.args[1]
    name, out, nodes = g.param(node.args[0]), node, {node}
    users = g.alias_users(node)
    scaled = _times_scalar(g, users[0]) if len(users) == 1 else None
    if scaled is not None and scaled[0] is node:
        name, out = derived(name, scale=scaled[1]), users[0]
        nodes.add(out)
    return Match(Kind.LOOKUP, "embedding", out, [g.root(ids)],
                 dict(m=numel(ids), n=table[1], v=table[0]),
                 params={"table": name}, nodes=nodes)


def _arg_op(g: AtenGraph, x: object, name: str) -> Node | None:
    r = g.root(x)
    return r if isinstance(r, Node) and opname(r) == name else None


def _with_scalar(g: AtenGraph, n: Node | None, name: str, value: float | None = None,
                 tol: float = 1e-4) -> Node | None:
    """``x`` when ``n`` is ``x <name> c`` (either order for add/mul) with ``c`` near
    ``value`` (any scalar when None)."""
    if n is None or opname(n) != name or len(n.args) < 2:
        return None
    pairs = [(n.args[0], n.args[1])] + ([(n.args[1], n.args[0])] if name != "div" else [])
    for x, c in pairs:
        v = scalar(c)
        if isinstance(x, Node) and v is not None and (value is None or abs(v - value) <= tol
                                                      * max(1.0, abs(value))):
            return g.root(x)
    return None


def _tanh_gelu(g: AtenGraph, node: Node) -> tuple[Node, set[Node]] | None:
    """``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`` spelled out (Phi's GELU)."""
    if opname(node) != "mul" or len(node.args) < 2:
        return None
    for a, b in ((node.args[0], node.args[1]), (node.args[1], node.args[0])):
        half, plus = g.root(a), g.root(b)
        x = _with_scalar(g, half if isinstance(half, Node) else None, "mul", 0.5)
        th = _with_scalar(g, plus if isinstance(plus, Node) else None, "add", 1.0)
        if x is None or th is None or opname(th) != "tanh":
            continue
        k = _with_scalar(g, _arg_op(g, th.args[0], "mul"), "mul", 0.7978845608028654)
        if k is None or opname(k) != "add":
            continue
        ins = [g.root(v) for v in k.args[:2]]
        if x not in ins:
            continue
        cube = next((v for v in ins if v is not x), None)
        p = _with_scalar(g, cube, "mul", 0.044715)
        if p is None or opname(p) != "pow" or g.root(p.args[0]) is not x or \
                scalar(p.args[1]) != 3.0:
            continue
        return x, {node, half, plus, th, g.root(th.args[0]), k, cube, p}
    return None


def activation(g: AtenGraph, node: Node) -> Match | None:
    """GELU (erf or tanh, the op or spelled out) and ReLU of one activation."""
    name = opname(node)
    if name == "gelu":
        fn = "gelu_tanh" if node.kwargs.get("approximate", "none") == "tanh" else "gelu_erf"
        x, nodes = g.root(node.args[0]), {node}
    elif name == "relu":
        fn, x, nodes = "relu", g.root(node.args[0]), {node}
    else:
        found = _tanh_gelu(g, node)
        if found is None:
            return None
        fn, (x, nodes) = "gelu_tanh", found
    m, n = rows(node)
    return Match(Kind.POINTWISE, "elementwise", node, [x], dict(m=m, n=n), {"fn": fn},
                 nodes=nodes)


def scale(g: AtenGraph, node: Node) -> Match | None:
    """``cap * tanh(x / cap)`` (soft-capping), else ``x * c`` or ``x / c`` by a number."""
    x = _with_scalar(g, node, "mul")
    th = _arg_op(g, x, "tanh") if x is not None else None
    if th is not None:
        cap = next(scalar(c) for c in node.args[:2] if scalar(c) is not None)
        inner = g.root(th.args[0])
        y = _with_scalar(g, inner, "div", cap) if isinstance(inner, Node) else None
        y = y if y is not None else _with_scalar(g, inner, "mul", 1.0 / cap) \
            if isinstance(inner, Node) and cap else y
        if y is not None and y in g.active:
            m, n = rows(node)
            return Match(Kind.POINTWISE, "elementwise", node, [y], dict(m=m, n=n),
                         {"fn": "softcap", "cap": cap}, nodes={node, th, inner})
    found = _times_scalar(g, node)
    if found is None or isinstance(found[1], str):
        return None
    m, n = rows(node)
    return Match(Kind.POINTWISE, "elementwise", node, [found[0]], dict(m=m, n=n),
                 {"fn": "scale", "alpha": found[1]}, nodes={node})


def argmax(g: AtenGraph, node: Node) -> Match | None:
    if opname(node) != "argmax":
        return None
    x = node.args[0]
    dim = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim")
    if dim is None or dim % len(g.shape(x)) != len(g.shape(x)) - 1:
        return None
    m, n = rows(x)
    return Match(Kind.SELECT, "argmax", node, [g.root(x)], dict(m=m, n=n), nodes={node})


def elementwise(g: AtenGraph, node: Node) -> Match | None:
    name, ins = opname(node), node.args
    if name == "add_" and isinstance(ins[0], Node) and g.users[ins[0]] == [node]:
        name = "add"  # in place into a value nothing else reads (Falcon's parallel sum)
    if name not in ("silu", "add", "mul"):
        return None
    m, n = rows(node)
    dims = dict(m=m, n=n)
    if name == "silu":
        return Match(Kind.POINTWISE, "elementwise", node, [g.root(ins[0])], dims,
                     {"fn": "silu"}, nodes={node})
    if name not in ("add", "mul") or len(ins) < 2:
        return None
    a, b = ins[:2]
    if not all(isinstance(v, Node) and v in g.active and numel(v) == numel(node)
               for v in (a, b)):
        return None
    if name == "add" and node.kwargs.get("alpha", 1) != 1:
        return None
    if name == "mul":  # x * sigmoid(x) is SiLU
        for x, s in ((a, b), (b, a)):
            if opname(s) == "sigmoid" and g.root(s.args[0]) is g.root(x) and \
                    g.users[s] == [node]:
                return Match(Kind.POINTWISE, "elementwise", node, [g.root(x)], dims, {"fn": "silu"},
                             nodes={node, s})
    return Match(Kind.POINTWISE, "elementwise", node, [g.root(a), g.root(b)], dims,
                 {"fn": name}, nodes={node})


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


def _slice(g: AtenGraph, n: object) -> tuple[Node, int, int, int, int] | None:
    """(x, dim, start, end, step) of a ``slice`` of x's last dim, else None (x as the
    slice reads it: compare roots)."""
    n = g.root(n)
    if not isinstance(n, Node) or opname(n) != "slice":
        return None
    a = list(n.args) + [None] * (5 - len(n.args))
    x = a[0]
    rank = len(g.shape(x))
    dim = (a[1] or 0) % rank
    if dim != rank - 1:
        return None
    size = g.shape(x)[-1]
    return x, dim, int(a[2] or 0), min(int(size if a[3] is None else a[3]), size), \
        int(a[4] or 1)


def _rotate_pairs_of(g: AtenGraph, node: object) -> tuple[Node, set[Node]] | None:
    """x when ``node`` is ``stack((-x[..., 1::2], x[..., ::2]), -1).flatten(-2)`` (rotary of
    neighbouring pairs: Cohere, GLM)."""
    fl = g.root(node)
    if not isinstance(fl, Node) or opname(fl) != "flatten":
        return None
    st = g.root(fl.args[0])
    if not isinstance(st, Node) or opname(st) != "stack" or len(st.args[0]) != 2:
        return None
    neg, even = (g.root(a) for a in st.args[0])
    if opname(neg) != "neg":
        return None
    odd = g.root(neg.args[0])
    e, o = _slice(g, even), _slice(g, odd)
    if e is None or o is None or g.root(e[0]) is not g.root(o[0]) or \
            (e[2], e[4], o[2], o[4]) != (0, 2, 1, 2):
        return None
    return g.root(e[0]), {fl, st, neg, odd, even}


def _rotated(g: AtenGraph, r: object) -> tuple[Node, str, set[Node]] | None:
    """(x, pairs, nodes) when ``r`` is x rotated: ``half`` (rotate-half) or
    ``interleaved`` (neighbouring pairs)."""
    x = _rotate_half_of(g, r)
    if x is not None:
        cat = g.root(r)
        neg = g.root(cat.args[0][0])
        return x, "half", {cat, neg, g.root(neg.args[0]), g.root(cat.args[0][1])}
    found = _rotate_pairs_of(g, r)
    return (found[0], "interleaved", found[1]) if found is not None else None


def _rope_core(g: AtenGraph, node: Node) -> tuple[Node, Node, Node, str, set[Node]] | None:
    """(x as the op reads it, cos, sin, pairs, nodes) of ``x * cos + rot(x) * sin``."""
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
        found = _rotated(g, r)
        if found is not None and found[0] is g.root(x):
            return x, cos, sin, found[1], {node, p1, p2} | found[2]
    return None


def _rope_match(g: AtenGraph, out: Node, x: Node, core: tuple, d: int, rot: int,
                nodes: set[Node]) -> Match:
    _, cos, sin, pairs, _ = core
    shape = g.shape(x)  # [b, heads, s, d] or [b, s, heads, d]: rows of b * s
    tab = g.shape(cos) if len(g.shape(cos)) == len(shape) else ()  # tokens, ``heads``
    heads = next((shape[i] for i in (1, 2) if len(shape) == 4 and tab  # each; the tables
                  and tab[i] == 1), 1)  # broadcast over the heads
    attrs: dict = {}
    if rot < d:
        attrs["rot"] = rot
    if pairs != "half":
        attrs["pairs"] = pairs
    params: dict[str, str] = {}
    if attrs:  # the tables as the model computes them from buffers and positions
        from .fallback import table_fn

        attrs["tables"], leaves = table_fn(g, cos, sin)
        params = {f"t{i}": name for i, name in enumerate(leaves)}
    return Match(Kind.ROTARY, "rope", out, [g.root(x)],
                 dict(m=numel(x) // (shape[-1] * heads), h=heads, d=d), attrs, params,
                 nodes=nodes, extra={"cos": cos, "sin": sin, "x": x})


def rope(g: AtenGraph, node: Node) -> Match | None:
    """``x * cos + rot(x) * sin`` over whole heads (rotate-half or neighbouring pairs)."""
    core = _rope_core(g, node)
    if core is None:
        return None
    d = g.shape(core[0])[-1]
    return _rope_match(g, node, core[0], core, d, d, core[4])


def partial_rope(g: AtenGraph, node: Node) -> Match | None:
    """``cat(rope(x[..., :r]), x[..., r:])``: the first ``r`` columns of each head rotate
    (Phi, StableLM, GPT-NeoX, GLM)."""
    if opname(node) != "cat" or len(node.args[0]) != 2:
        return None
    dim = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim", 0)
    if dim % len(g.shape(node)) != len(g.shape(node)) - 1:
        return None
    a, b = (g.root(p) for p in node.args[0])
    core = _rope_core(g, a) if isinstance(a, Node) else None
    if core is None:
        return None
    head, rest = _slice(g, core[0]), _slice(g, b)
    if head is None or rest is None or g.root(head[0]) is not g.root(rest[0]) or head[2] != 0 or \
            head[4] != 1 or rest[4] != 1 or rest[2] != head[3]:
        return None
    x, d, r = head[0], g.shape(head[0])[-1], head[3]
    if rest[3] != d:
        return None
    nodes = core[4] | {node, g.root(core[0]), b}
    return _rope_match(g, node, x, core, d, r, nodes)


def rmsnorm(g: AtenGraph, node: Node) -> Match | None:
    """``rms_norm``, or ``x * rsqrt(mean(x^2) + eps)`` spelled out, then an optional weight."""
    f = find_norm(g, node)
    if f is None or f.centred or "b" in f.params:
        return None
    return Match(Kind.NORM, "rmsnorm", f.out, [f.x], dict(m=f.m, n=f.n), {"eps": f.eps},
                 f.params, f.nodes)


def merge_ropes(g: AtenGraph, matches: list[Match]) -> list[Match]:
    """One rotary operator per attention from its q and k rotations (same tables); the
    matches stay in graph order."""
    order = {n: i for i, n in enumerate(g.graph.nodes)}
    by_out = {m.out: m for m in matches}
    drop: set[int] = set()
    for a in (m for m in matches if m.kind is Kind.ATTENTION):
        rq, rk = by_out.get(a.ins[0]), by_out.get(a.ins[1])
        if rq is None or rk is None or rq.kind is not Kind.ROTARY or rk.kind is not Kind.ROTARY or \
                g.root(rq.extra["cos"]) is not g.root(rk.extra["cos"]):
            continue
        n_rows = a.dims["b"] * a.dims["q"]
        d = rq.dims["d"]
        heads = rq.dims["h"] + rk.dims["h"]
        later = max(rq, rk, key=lambda m: order[m.out])
        if rq.attrs != rk.attrs or rq.dims["d"] != rk.dims["d"]:
            continue
        merged = Match(Kind.ROTARY, "rope", later.out, [rq.ins[0], rk.ins[0]],
                       dict(m=n_rows, h=heads, d=d), dict(rq.attrs), dict(rq.params),
                       nodes=rq.nodes | rk.nodes,
                       extra={**rq.extra, "q_out": rq.out, "k_out": rk.out,
                              "q_x": rq.extra["x"], "k_x": rk.extra["x"]})
        drop |= {id(rq), id(rk)}
        matches.append(merged)
        a.extra["qk_rotary"] = merged
    out = [m for m in matches if id(m) not in drop]
    out.sort(key=lambda m: order[m.out])
    return out
