"""The small families (rmsnorm, rope, elementwise, embedding, argmax): placement spaces."""

from search_spaces.pointwise.space import (
    DEFAULT_EPS,
    ELEMENTWISE_FNS,
    PIM_BINARY_FNS,
    POINTWISE_FAMILIES,
    VERSION,
    pim_unavailable,
    pointwise_default,
    pointwise_library,
    pointwise_space,
)

__all__ = ["DEFAULT_EPS", "ELEMENTWISE_FNS", "PIM_BINARY_FNS", "POINTWISE_FAMILIES", "VERSION",
           "pim_unavailable", "pointwise_default", "pointwise_library", "pointwise_space"]
