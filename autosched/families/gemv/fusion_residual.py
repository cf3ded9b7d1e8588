"""The GEMV fusion rules around the residual add (``residual_epilogue``,
``norm_epilogue``): constant output scales folded into the weights, post-norms, the
residual add itself, a parallel block's sum re-associated into its linears, and the next
norm (RMSNorm or a whole-row LayerNorm) appended to the sum."""

from __future__ import annotations

import dataclasses

from autosched.ir import FusionError, OpNode
from autosched.ir.derived import derived
from search_spaces.pointwise import DEFAULT_EPS

from .fusion_state import LINEAR, FusionState, rows_of, with_attrs

__all__ = ["norm_epilogue", "parallel_residual", "residual", "scales"]


def scales(st: FusionState) -> None:
    """A linear read only by ``x * c`` computes ``x (c W)^T + c b``: the scale node goes."""
    for lin in [n for n in st.nodes if n.workload.op in LINEAR]:
        users = st.consumers(lin.name)
        if len(users) != 1 or users[0].workload.op != "elementwise" or \
                users[0].workload.attr("fn") != "scale" or lin.workload.attr("epilogue") \
                or rows_of(users[0].workload) != rows_of(lin.workload):
            continue
        sc, alpha = users[0], float(users[0].workload.attr("alpha"))
        params = {k: ("|".join(derived(p, scale=alpha) for p in v.split("|"))
                      if k in ("W", "b") else v) for k, v in lin.params}
        st.scale[lin.name] = st.scale.get(lin.name, 1.0) * alpha
        st.swap(lin, dataclasses.replace(lin, params=tuple(sorted(params.items()))))
        st.swap(sc, None)
        st.rewire({sc.name: lin.name})


def _post_norm(st: FusionState, lin: OpNode) -> OpNode | None:
    """The post-norm read only by one add that ``lin`` alone feeds (Gemma 2/3, OLMo 2)."""
    users = st.consumers(lin.name)
    post = users[0] if len(users) == 1 else None
    if post is None or post.workload.op != "rmsnorm" or not post.role.endswith("post_norm") \
            or rows_of(post.workload) != rows_of(lin.workload):
        return None
    after = st.consumers(post.name)
    return post if len(after) == 1 and after[0].workload.op == "elementwise" and \
        after[0].workload.attr("fn") == "add" else None


def residual(st: FusionState) -> None:
    for lin in [n for n in st.nodes if n.role in ("o_proj", "ffn_down")]:
        post = _post_norm(st, lin) if not lin.workload.attr("epilogue") else None
        if post is not None:  # the post-norm first, in the same epilogue
            st.post_norm[lin.name] = post.name
            params = dict(lin.params)
            if post.param("w"):
                params["post_norm_w"] = post.param("w")
            eps = float(post.workload.attr("eps", DEFAULT_EPS))
            lin2 = dataclasses.replace(lin, workload=with_attrs(lin.workload, post_eps=eps),
                                       params=tuple(sorted(params.items())))
            st.swap(lin, lin2)
            st.swap(post, None)
            st.rewire({post.name: lin.name})
            lin = lin2
        users = st.consumers(lin.name)
        add = users[0] if len(users) == 1 else None
        if add is None or add.workload.op != "elementwise" or add.workload.attr("fn") != "add":
            continue  # a scale between it and the residual add
        if (len(add.inputs) != 2 or lin.workload.attr("epilogue")
                or rows_of(add.workload) != rows_of(lin.workload)):
            raise FusionError(f"{lin.name}: residual_epilogue needs one residual add "
                              f"consuming it, found {[u.name for u in users]}")
        res = next(i for i in add.inputs if i != lin.name)
        epi = "norm_add" if lin.name in st.post_norm else "add"
        st.swap(lin, None)
        st.swap(add, dataclasses.replace(lin, workload=with_attrs(lin.workload, epilogue=epi),
                                         inputs=(lin.inputs[0], res)))
        st.rewire({add.name: lin.name})


def _parallel_parts(st: FusionState, lin: OpNode) -> tuple[OpNode, OpNode, str] | None:
    """(the MLP's last linear, the add, the residual ``x``) when ``o_proj`` ``lin`` adds
    the MLP's output and one add alone adds ``x`` to that sum; ``x`` made before the MLP."""
    order = {n.name: i for i, n in enumerate(st.nodes)}
    mlp = next((n for n in st.nodes if n.name == lin.inputs[1]), None)
    users = st.consumers(lin.name)
    add = users[0] if len(users) == 1 else None
    if mlp is None or add is None or mlp.workload.op not in LINEAR \
            or mlp.workload.attr("epilogue") or st.consumers(mlp.name) != [lin]:
        return None
    if add.workload.op != "elementwise" or add.workload.attr("fn") != "add" \
            or len(add.inputs) != 2 or \
            not rows_of(add.workload) == rows_of(lin.workload) == rows_of(mlp.workload):
        return None
    res = next((i for i in add.inputs if i != lin.name), None)
    if res is None or res == mlp.name or order.get(res, len(order)) > order[mlp.name]:
        return None
    return mlp, add, res


def parallel_residual(st: FusionState) -> None:
    """``(attn + mlp) + x`` of a parallel block (Phi, GPT-NeoX, Falcon), once ``o_proj``
    adds the MLP's output: the MLP's last linear adds the residual ``x`` instead, so the
    sum leaves ``o_proj`` whole and the add node goes (re-associated: the same sum in
    another order)."""
    for name in [n.name for n in st.nodes if n.role == "o_proj"
                 and n.workload.attr("epilogue") == "add"]:
        lin = next(n for n in st.nodes if n.name == name)
        found = _parallel_parts(st, lin)
        if found is None:
            continue
        mlp, add, res = found
        st.swap(mlp, dataclasses.replace(mlp, workload=with_attrs(mlp.workload, epilogue="add"),
                                         inputs=(mlp.inputs[0], res)))
        st.swap(add, None)
        st.rewire({add.name: lin.name})


def norm_epilogue(st: FusionState) -> None:
    for lin in [n for n in st.nodes if n.workload.attr("epilogue") in ("add", "norm_add")
                or (n.workload.op == "embedding" and not n.workload.attr("epilogue"))]:
        users = st.consumers(lin.name)
        norms = [u for u in users if u.workload.op == "rmsnorm" or _layer_norm(u, lin)]
        if len(norms) != 1 or rows_of(norms[0].workload) != rows_of(lin.workload):
            continue
        r = norms[0]
        readers = st.consumers(r.name)
        others = [u for u in users if u is not r]
        if not readers or not all(u.workload.op in LINEAR and u.inputs[0] == r.name
                                  and r.name not in u.inputs[1:] for u in readers) \
                or not all(u.workload.op in LINEAR
                           and u.workload.attr("epilogue") in ("add", "norm_add")
                           and u.inputs[1:] == (lin.name,) and u.inputs[0] != lin.name
                           for u in others):
            continue  # the sum must reach linears' x only through the norm, others' r only
        eps = float(r.workload.attr("eps", DEFAULT_EPS))
        params = dict(lin.params)
        for k in ("w", "b"):
            if r.param(k):
                params[f"out_norm_{k}"] = r.param(k)
        st.out_norm[lin.name] = r.name
        epi = r.workload.op if lin.workload.op == "embedding" else \
            f"{lin.workload.attr('epilogue')}_{r.workload.op}"
        st.swap(lin, dataclasses.replace(
            lin, workload=with_attrs(lin.workload, epilogue=epi, out_eps=eps),
            params=tuple(sorted(params.items()))))
        st.swap(r, None)
        st.rewire({r.name: lin.name})


def _layer_norm(u: OpNode, lin: OpNode) -> bool:
    """Whether ``u`` is a whole-row LayerNorm an ``add`` epilogue of ``lin`` (or the
    embedding) can append."""
    return u.workload.op == "layernorm" and int(u.workload.attr("heads", 1)) == 1 and \
        (lin.workload.attr("epilogue") == "add" or lin.workload.op == "embedding")
