"""Fusion: rewriting an operator graph by a plan (:mod:`.rewrite`) and binding every
kernel operand to the columns of the node outputs that hold it (:mod:`.operands`)."""

from .operands import TOKEN_IDS, FusedView, FusionError, operands, output_parts, output_width
from .rewrite import apply_fusion, fuse_weights

__all__ = ["TOKEN_IDS", "FusedView", "FusionError", "apply_fusion", "fuse_weights",
           "operands", "output_parts", "output_width"]
