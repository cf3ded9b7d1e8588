"""Where every operand of a (fused or unfused) graph's kernels comes from.

Every node output is a matrix ``[rows, width]`` (:func:`output_width`); :func:`operands`
maps each activation input of a node's kernel (family convention names: ``x``, ``r``,
``a``, ``b``, ``q``, ``k``, ``v``, ``ids``, ``x0``.. of a host op) to the
:class:`FusedView` s whose column-concatenation forms it. Outputs holding several
logical tensors are labelled by :func:`output_parts`: ``qkv_proj`` = q | k | v, ``rope``
= q | k, ``gate_up`` (without silu_mul) = gate | up, a linear with
``epilogue="add_rmsnorm"`` (or the embedding with ``epilogue="rmsnorm"``) = res | norm
(its ``r`` consumers read the sum, the others its normalised copy), a linear with
``epilogue="argmax"`` = out | token (the logits, then each row's argmax). E.g.
attention ``v`` = columns ``[(h+kvh)d, (h+2kvh)d)`` of ``qkv_proj``; rope ``x`` of an
unfused graph = ``q_proj`` | ``k_proj`` (two views), of a merged one columns
``[0, (h+kvh)d)`` of ``qkv_proj`` (adjacent columns of one source are always one view).
``last`` marks a consumer that reads only each sequence's last token (the prefill LM
head). Token ids come from the step input :data:`TOKEN_IDS`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from autosched.families import family_of
from autosched.ir import FusionError, OpGraph, OpNode
from search_spaces import Workload

__all__ = ["TOKEN_IDS", "FusedView", "FusionError", "operands", "output_parts", "output_width"]

TOKEN_IDS = "ids"  # the step's token ids [rows, 1]: not a node
# the part a consumer reads of a merged output, by its role
_ROLE_PART = {"ffn_silu": "gate", "ffn_act": "gate", "ffn_mul": "up", "q_norm": "q",
              "k_norm": "k"}


@dataclass(frozen=True)
class FusedView:
    """Columns ``[lo, hi)`` of ``source``'s output ``[rows, width]``; ``last``: only the row
    of each sequence's last token (row ``s * tokens + tokens - 1``); ``width``: the row
    width the consumer reads the output with when it differs from the source's own (0:
    the same), a reshape of the whole output (one row per head, or per token)."""

    source: str
    lo: int
    hi: int
    last: bool = False
    width: int = 0


def output_width(w: Workload) -> int:
    """Columns of the output of ``w`` seen as ``[rows, width]``."""
    return family_of(w).output_width(w)


def _rows(w: Workload) -> int:
    return family_of(w).rows(w)


def output_parts(graph: OpGraph, node: OpNode) -> dict[str, tuple[int, int]]:
    """Labelled column ranges of ``node``'s output (one ``"out"`` range when unlabelled)."""
    return family_of(node.workload).output_parts(graph, node)


def _view(graph: OpGraph, node: OpNode, src: str, span: tuple[int, int]) -> FusedView:
    want, have = _rows(node.workload), _rows(graph.node(src).workload)
    last = have == graph.batch * graph.tokens and want == graph.batch
    if want != have and not last:
        full = span == (0, output_width(graph.node(src).workload))
        if full and family_of(node.workload).reshapes_inputs:  # it reshapes them itself
            return FusedView(src, span[0], span[1])
        # the columns read as rows of another width (one row per head): a reshape
        if have * (span[1] - span[0]) % want == 0:
            if not full:  # gathered into rows of their own first
                return FusedView(src, span[0], span[1])
            width = have * (span[1] - span[0]) // want
            return FusedView(src, 0, width, width=width)
        raise FusionError(f"{node.name} reads {want} rows from {src}, which has {have}")
    return FusedView(src, span[0], span[1], want != have)


def _whole(graph: OpGraph, node: OpNode, src: str) -> FusedView:
    return _view(graph, node, src, (0, output_width(graph.node(src).workload)))


def _unlabelled(graph: OpGraph, node: OpNode, lab: str, labels: tuple[str, ...]) -> str:
    """The input of ``node`` holding ``lab`` when no producer labels it (q, k or v computed
    by other ops): its inputs labelled by none of ``labels``, in the order of the labels no
    producer holds."""
    held = {x for src in node.inputs for x in output_parts(graph, graph.node(src))}
    free = [src for src in node.inputs
            if set(output_parts(graph, graph.node(src))).isdisjoint(labels)]
    missing = [x for x in labels if x not in held]
    if lab not in missing or len(free) != len(missing):
        raise FusionError(f"{node.name}: none of its inputs {node.inputs} holds {lab!r}")
    return free[missing.index(lab)]


def _labelled(graph: OpGraph, node: OpNode, labels: tuple[str, ...],
              every: tuple[str, ...]) -> tuple[FusedView, ...]:
    out = []
    for lab in labels:
        for src in node.inputs:
            parts = output_parts(graph, graph.node(src))
            if lab in parts:
                v = _view(graph, node, src, parts[lab])
                prev = out[-1] if out else None
                if prev and (prev.source, prev.hi, prev.last) == (v.source, v.lo, v.last):
                    v = dataclasses.replace(prev, hi=v.hi)  # adjacent columns: one view
                    out.pop()
                out.append(v)
                break
        else:  # q, k or v computed by other ops (unlabelled): the free inputs in order
            out.append(_whole(graph, node, _unlabelled(graph, node, lab, every)))
    return tuple(out)


def operands(graph: OpGraph, node: OpNode) -> dict[str, tuple[FusedView, ...]]:
    """Activation inputs of ``node``'s kernel, each as the views to concatenate by column."""
    fam, w = family_of(node.workload), node.workload
    if fam.reads_tokens:
        return {"ids": (FusedView(TOKEN_IDS, 0, 1),)}
    labelled = fam.labelled_operands(node)
    if labelled is not None:
        every = tuple(lab for labs in labelled.values() for lab in labs)
        return {k: _labelled(graph, node, labs, every) for k, labs in labelled.items()}
    names = fam.operand_names(node)
    if len(names) != len(node.inputs):
        raise FusionError(f"{node.name} ({w.key}) has inputs {node.inputs}, its kernel "
                          f"reads {names}")
    out = {}
    for name, src in zip(names, node.inputs, strict=True):
        parts = output_parts(graph, graph.node(src))
        if fam.reads_whole(node):
            out[name] = (_whole(graph, node, src),)
        elif "norm" in parts:  # a residual sum's r reads the sum, any other input its norm
            out[name] = (_view(graph, node, src, parts["res" if name == "r" else "norm"]),)
        elif len(parts) > 1:
            lab = _ROLE_PART.get(node.role)
            if lab not in parts:
                raise FusionError(f"{node.name} reads merged {src} but its role {node.role!r} "
                                  f"names none of its parts {sorted(parts)}")
            out[name] = (_view(graph, node, src, parts[lab]),)
        else:
            out[name] = (_view(graph, node, src, next(iter(parts.values()))),)
    return out
