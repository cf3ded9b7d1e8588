"""Fusion: rewriting an operator graph by a plan, and binding every kernel operand to the
columns of the node outputs that hold it (:mod:`.operands`).

A plan is a point of ``search_spaces.fusion.fusion_space``; each family applies the
decisions it owns (``Family.fuse``: the GEMV family absorbs norms, rotary tables,
residuals and activations into its host prologue and epilogues), in registry order.
"""

from __future__ import annotations

import numpy as np

from autosched.families import families
from autosched.ir import OpGraph
from search_spaces.fusion import fusion_space, upgrade_plan

from .operands import TOKEN_IDS, FusedView, FusionError, operands, output_parts, output_width

__all__ = ["TOKEN_IDS", "FusedView", "FusionError", "apply_fusion", "fuse_weights",
           "operands", "output_parts", "output_width"]


def _checked(plan: dict) -> dict:
    plan = upgrade_plan(plan)
    fusion_space().check(plan)
    return plan


def apply_fusion(graph: OpGraph, plan: dict) -> OpGraph:
    """The graph with ``plan`` applied by every family; ``graph`` is unchanged."""
    plan = _checked(plan)
    for fam in families():
        graph = fam.fuse(graph, plan)
    return graph


def fuse_weights(graph: OpGraph, plan: dict,
                 weights: dict[str, dict[str, np.ndarray]]) -> dict[str, dict[str, np.ndarray]]:
    """Weights of ``apply_fusion(graph, plan)`` from those of ``graph`` (keyed by node name,
    then tensor name: ``W``, ``b``, ``w``, ``table``)."""
    plan = _checked(plan)
    for fam in families():
        weights = fam.fuse_weights(graph, plan, weights)
        graph = fam.fuse(graph, plan)
    return weights
