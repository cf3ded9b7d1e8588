"""The GEMV family's fusion rules: a plan rewrites an operator graph, and the weights to
match.

``fuse(graph, plan)`` (plan: a point of ``search_spaces.fusion.fusion_space``, checked
by the caller) returns a new :class:`OpGraph` whose nodes carry the fused workloads:
merged linears are named ``l{i}.qkv_proj`` / ``l{i}.gate_up`` (roles ``qkv_proj``,
``gate_up``; parameter names of the parts joined by ``|`` in order), absorbing linears
(and the embedding) keep their name and role with new attrs (``prologue``, ``eps``,
``epilogue``, ``out_eps``), removed nodes' consumers read the node that replaced them.
``fuse_weights`` gives the weights of the fused graph (merged ``W``/``b`` concatenated in
q|k|v and gate|up order, ``norm_w`` / ``out_norm_w`` from the absorbed norm's ``w``, and
``norm_b`` / ``out_norm_b`` from a LayerNorm's ``b``: a ``layernorm`` prologue,
``add_layernorm``).

Beyond the plan's names: ``silu_mul_epilogue`` gates ``gate_up`` by whichever activation
the MLP uses (``{act}_mul``: SiLU, GELU, ReLU) and gives a non-gated ``fc1`` its
activation as its epilogue (after its bias); ``residual_epilogue`` first folds a constant
scale of a linear's output (Granite's residual and logit multipliers, Cohere's logit
scale) into its weights (``W`` and ``b`` named ``name@s=c``: :mod:`autosched.ir.derived`),
and takes a post-norm between the linear and the add (Gemma 2/3, OLMo 2) into the same
epilogue (``norm_add``, ``norm_add_rmsnorm``: constant ``post_norm_w``, attr ``post_eps``);
a parallel block's ``(attn + mlp) + x`` becomes ``attn + (mlp + x)``, added by the MLP's
last linear and then ``o_proj``; ``norm_epilogue`` appends an RMSNorm or a whole-row
LayerNorm (``add_layernorm``). ``rope_epilogue`` takes partial and interleaved rotary
too (attrs ``rope_rot``, ``rope_pairs``, ``rope_tables``: the rope's own tables).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from autosched.ir import FusionError, OpGraph, OpNode
from search_spaces.pointwise import ACTIVATION_FNS, DEFAULT_EPS

from ..pointwise.families import is_table_leaf
from .fusion_residual import norm_epilogue, parallel_residual, residual, scales
from .fusion_state import LINEAR, FusionState, rows_of, with_attrs

__all__ = ["fuse", "fuse_weights"]

# the roles that find their part of a merged output (``operands``)
_PART_READERS = ("q_norm", "k_norm", "ffn_silu", "ffn_act", "ffn_mul")


def _reads_parts(st: FusionState, node: OpNode) -> bool:
    """Whether every consumer of ``node`` would read its part of a merged output."""
    return all(u.workload.op in ("rope", "attention") and u.role != "rotary"
               or u.role in _PART_READERS for u in st.consumers(node.name))


def _merge(st: FusionState, roles: tuple[str, ...], role: str) -> None:
    for layer in sorted({n.layer for n in st.nodes if n.role == roles[0]}, key=str):
        parts = [next((n for n in st.nodes if n.role == r and n.layer == layer), None)
                 for r in roles]
        if None in parts or not all(_reads_parts(st, p) for p in parts):
            continue  # not there, or read by ops that would not find their part
        w0 = parts[0].workload
        same = all(p.inputs == parts[0].inputs and p.workload.op == w0.op
                   and (p.workload.dtype, p.workload.attrs) == (w0.dtype, w0.attrs)
                   and p.workload.dims["k"] == w0.dims["k"]
                   and p.workload.dims["m"] == w0.dims["m"] for p in parts)
        if not same or w0.op not in LINEAR:
            raise FusionError(f"cannot merge {[p.name for p in parts]} into {role}: they need "
                              "the same input, family, m, k, dtype and attrs")
        name = role if layer is None else f"l{layer}.{role}"
        n = sum(p.workload.dims["n"] for p in parts)
        st.origin[name] = sum((st.origin.get(p.name, (p.name,)) for p in parts), ())
        joined = {k: "|".join(p.param(k) or "" for p in parts) for k in ("W", "b")
                  if parts[0].param(k)}
        st.swap(parts[0], OpNode(name, with_attrs(w0, {"n": n}), parts[0].inputs, layer, role,
                                 tuple(sorted(joined.items()))))
        for p in parts[1:]:
            st.swap(p, None)
        st.rewire({p.name: name for p in parts})


def _act_fn(node: OpNode) -> str | None:
    """The activation an MLP node computes (an element-wise fn), else None."""
    fn = node.workload.attr("fn") if node.workload.op == "elementwise" else None
    return fn if node.role in ("ffn_silu", "ffn_act") and fn in ACTIVATION_FNS else None


def _silu_mul(st: FusionState) -> None:
    for g in [n for n in st.nodes if n.role == "gate_up"]:
        users = st.consumers(g.name)
        act = next((u for u in users if _act_fn(u) and u.inputs == (g.name,)), None)
        if act is None:
            continue  # an activation run on the host: no epilogue computes it
        mul = next((u for u in users if u.role == "ffn_mul"
                    and sorted(u.inputs) == sorted((act.name, g.name))), None)
        if mul is None or len(users) != 2 or st.consumers(act.name) != [mul]:
            raise FusionError(f"{g.name}: silu_mul_epilogue needs exactly act(gate) * up "
                              f"after it, found consumers {[u.name for u in users]}")
        epi = f"{_act_fn(act)}_mul"
        st.swap(g, dataclasses.replace(g, workload=with_attrs(g.workload, epilogue=epi)))
        st.swap(act, None)
        st.swap(mul, None)
        st.rewire({mul.name: g.name})


def _act_epilogue(st: FusionState) -> None:
    """A non-gated ``fc1`` (``ffn_up`` read only by its activation) applies it."""
    for lin in [n for n in st.nodes if n.role == "ffn_up" and n.workload.op in LINEAR]:
        users = st.consumers(lin.name)
        if len(users) != 1 or not _act_fn(users[0]) or lin.workload.attr("epilogue") \
                or rows_of(users[0].workload) != rows_of(lin.workload):
            continue
        act = users[0]
        st.swap(lin, dataclasses.replace(lin, workload=with_attrs(lin.workload,
                                                             epilogue=_act_fn(act))))
        st.swap(act, None)
        st.rewire({act.name: lin.name})


def _head_norms(st: FusionState, r: OpNode) -> tuple[OpNode, OpNode, OpNode] | None:
    """(qkv_proj, q_norm, k_norm) when rope ``r`` rotates the per-head norms of q and k,
    each read by ``r`` alone, computed from one merged qkv_proj: RMS norms (Qwen3, Gemma
    3) or LayerNorms without shift, one scale for all heads or one per head (Cohere)."""
    named = {n.name: n for n in st.nodes}
    ins = [named.get(i) for i in r.inputs]
    qn = next((n for n in ins if n is not None and n.role == "q_norm"), None)
    kn = next((n for n in ins if n is not None and n.role == "k_norm"), None)
    if len(ins) != 2 or qn is None or kn is None or qn.inputs != kn.inputs or \
            len(qn.inputs) != 1:
        return None
    lin = named.get(qn.inputs[0])
    d, op = r.workload.dims["d"], qn.workload.op
    ok = lin is not None and lin.role == "qkv_proj" and op in ("rmsnorm", "layernorm") and all(
        x.workload.op == op and x.workload.dims["n"] == d and st.consumers(x.name) == [r]
        and x.workload.attr("eps", DEFAULT_EPS) == qn.workload.attr("eps", DEFAULT_EPS)
        and not x.param("b") for x in (qn, kn))
    return (lin, qn, kn) if ok else None


def _rope(st: FusionState) -> None:
    for r in [n for n in st.nodes if n.workload.op == "rope"]:
        lin = next((n for n in st.nodes if r.inputs == (n.name,)), None)
        norms = _head_norms(st, r) if lin is None else None
        if norms is not None:
            lin, qn, kn = norms
            epi = "qknorm_rope" if qn.workload.op == "rmsnorm" else "qklnorm_rope"
            _rope_into(st, r, lin, epi, (qn, kn))
            continue
        if lin is None or lin.role != "qkv_proj":
            continue  # q and k reach it through other ops: the rope stays
        _rope_into(st, r, lin, "rope", ())


def _rope_into(st: FusionState, r: OpNode, lin: OpNode, epi: str, norms: tuple[OpNode, ...]
               ) -> None:
    """``lin`` takes rope ``r`` (and the head norms between them) as epilogue ``epi``."""
    d = r.workload.dims
    if (lin.workload.attr("epilogue")
            or rows_of(lin.workload) != d["m"] or d["h"] * d["d"] > lin.workload.dims["n"]
            or not all(u.workload.op == "attention" for u in st.consumers(r.name))):
        raise FusionError(f"{r.name}: rope_epilogue needs a rope reading q | k of a merged "
                          "qkv_proj with no epilogue, read by attention only")
    params, attrs = dict(lin.params), {"epilogue": epi, "rope_heads": d["h"], "rope_d": d["d"]}
    for k in ("rot", "pairs", "tables"):  # partial, interleaved, tables from the graph
        if r.workload.attr(k) is not None:
            attrs[f"rope_{k}"] = r.workload.attr(k)
    for k, name in r.params:
        if k in ("rotary", "rotary_kind") or is_table_leaf(k):
            params[k] = name
    if norms:
        qn, kn = norms
        attrs["qk_heads"] = rows_of(qn.workload) // d["m"]
        attrs["qk_eps"] = float(qn.workload.attr("eps", DEFAULT_EPS))
        if any(int(x.workload.attr("heads", 1)) > 1 for x in norms):  # a scale per head
            attrs["qk_per_head"] = 1
        for name, node in (("q_norm_w", qn), ("k_norm_w", kn)):
            if node.param("w"):
                params[name] = node.param("w")
    st.swap(lin, dataclasses.replace(lin, workload=with_attrs(lin.workload, **attrs),
                                     params=tuple(sorted(params.items()))))
    for x in (*norms, r):
        st.swap(x, None)
    st.rewire({x.name: lin.name for x in (*norms, r)})


def _softcap(st: FusionState) -> None:
    """A linear read only by a soft-cap of its whole output (Gemma 2's final logits) caps
    them in its epilogue: the soft-cap node goes."""
    for lin in [n for n in st.nodes if n.workload.op in LINEAR]:
        users = st.consumers(lin.name)
        if len(users) != 1 or users[0].workload.op != "elementwise" or \
                users[0].workload.attr("fn") != "softcap" or lin.workload.attr("epilogue") \
                or users[0].inputs != (lin.name,) \
                or rows_of(users[0].workload) != rows_of(lin.workload):
            continue
        cap = float(users[0].workload.attr("cap"))
        st.swap(lin, dataclasses.replace(lin, workload=with_attrs(lin.workload,
                                                                  epilogue="softcap", cap=cap)))
        st.swap(users[0], None)
        st.rewire({users[0].name: lin.name})


def _argmax(st: FusionState) -> None:
    for a in [n for n in st.nodes if n.workload.op == "argmax"]:
        lin = next((n for n in st.nodes if a.inputs == (n.name,)), None)
        if (lin is None or lin.workload.op not in LINEAR
                or lin.workload.attr("epilogue", "") not in ("", "softcap")
                or st.consumers(lin.name) != [a] or rows_of(lin.workload) != rows_of(a.workload)
                or lin.workload.dims["n"] != a.workload.dims["n"]):
            continue  # only logits (soft-capped or not) read by nothing but their argmax
        epi = "softcap_argmax" if lin.workload.attr("epilogue") else "argmax"
        st.swap(lin, dataclasses.replace(lin, workload=with_attrs(lin.workload, epilogue=epi)))
        st.swap(a, None)
        st.rewire({a.name: lin.name})


def _norms(st: FusionState) -> None:
    """Each RMSNorm read only as the ``x`` of linears becomes their prologue, and so does a
    one-scale LayerNorm read by one linear (each reader would repeat the norm, which costs
    a LayerNorm more than the dispatch it saves)."""
    for r in [n for n in st.nodes if n.workload.op in ("rmsnorm", "layernorm")
              and int(n.workload.attr("heads", 1)) == 1]:
        users = st.consumers(r.name)
        if r.workload.op == "layernorm" and len(users) != 1:
            continue
        if not users or not all(u.workload.op in LINEAR and u.inputs[0] == r.name
                                and r.name not in u.inputs[1:]
                                and not u.workload.attr("prologue") for u in users):
            continue  # a norm read by anything but a linear's x stays a node
        eps = float(r.workload.attr("eps", DEFAULT_EPS))
        for u in users:
            st.norm[u.name] = r.name
            params = dict(u.params)
            for src, dst in (("w", "norm_w"), ("b", "norm_b")):
                if r.param(src):
                    params[dst] = r.param(src)
            st.swap(u, dataclasses.replace(
                u, workload=with_attrs(u.workload, prologue=r.workload.op, eps=eps),
                inputs=(r.inputs[0], *u.inputs[1:]), params=tuple(sorted(params.items()))))
        st.swap(r, None)


def _fuse(graph: OpGraph, plan: dict) -> FusionState:
    st = FusionState(list(graph.nodes), {}, {})
    if plan["merge_qkv"]:
        _merge(st, ("q_proj", "k_proj", "v_proj"), "qkv_proj")
        if plan["rope_epilogue"]:
            _rope(st)
    if plan["merge_gate_up"]:
        _merge(st, ("ffn_gate", "ffn_up"), "gate_up")
        if plan["silu_mul_epilogue"]:
            _silu_mul(st)
            _act_epilogue(st)
    if plan["residual_epilogue"]:
        scales(st)
        residual(st)
        parallel_residual(st)
        if plan["norm_epilogue"]:
            norm_epilogue(st)
    if plan["norm_into_linear"]:
        _norms(st)
    if plan["argmax_epilogue"]:
        _softcap(st)
        _argmax(st)
    return st


def fuse(graph: OpGraph, plan: dict) -> OpGraph:
    """The graph with ``plan`` applied (see the module docstring); ``graph`` is unchanged."""
    return dataclasses.replace(graph, nodes=tuple(_fuse(graph, plan).nodes))


def fuse_weights(graph: OpGraph, plan: dict,
                 weights: dict[str, dict[str, np.ndarray]]) -> dict[str, dict[str, np.ndarray]]:
    """Weights of ``fuse(graph, plan)`` from those of ``graph`` (keyed by node name,
    then tensor name: ``W``, ``b``, ``w``, ``table``)."""
    st = _fuse(graph, plan)
    out: dict[str, dict[str, np.ndarray]] = {}
    for n in st.nodes:
        srcs = st.origin.get(n.name, (n.name,))
        t = dict(weights.get(srcs[0], {}))
        for key in ("W", "b"):
            if len(srcs) > 1 and key in t:
                t[key] = np.concatenate([weights[s][key] for s in srcs], axis=0)
            if n.name in st.scale and key in t:
                t[key] = t[key] * st.scale[n.name]
        if n.name in st.norm:
            for src, dst in (("w", "norm_w"), ("b", "norm_b")):
                if src in weights.get(st.norm[n.name], {}):
                    t[dst] = weights[st.norm[n.name]][src]
        if n.name in st.out_norm:
            t["out_norm_w"] = weights[st.out_norm[n.name]]["w"]
            if "b" in weights[st.out_norm[n.name]]:
                t["out_norm_b"] = weights[st.out_norm[n.name]]["b"]
        if n.name in st.post_norm:
            t["post_norm_w"] = weights[st.post_norm[n.name]]["w"]
        if t:
            out[n.name] = t
    return out
