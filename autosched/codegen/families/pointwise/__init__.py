"""The point-wise families (rmsnorm, rope, elementwise, embedding, argmax): one host op, or
the in-bank element-wise kernel."""

from .bound import pointwise_bound
from .lowering import PointwiseLowering, binary

__all__ = ["PointwiseLowering", "binary", "pointwise_bound"]
