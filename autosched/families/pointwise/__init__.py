"""The point-wise families (rmsnorm, rope, elementwise, embedding, argmax, extern): one
host op, or the in-bank element-wise kernel."""

from .bound import pointwise_bound
from .families import (
    POINTWISE,
    ArgmaxFamily,
    ElementwiseFamily,
    EmbeddingFamily,
    ExternFamily,
    RmsNormFamily,
    RopeFamily,
)
from .kernels import binary

__all__ = ["POINTWISE", "ArgmaxFamily", "ElementwiseFamily", "EmbeddingFamily", "ExternFamily",
           "RmsNormFamily", "RopeFamily", "binary", "pointwise_bound"]
