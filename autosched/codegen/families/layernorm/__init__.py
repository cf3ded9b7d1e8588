"""LayerNorm with weight and bias: the host kernel, its lowering and the family's bound."""

from .bound import layernorm_bound
from .kernel import layernorm_kernel
from .lowering import LayerNormLowering

__all__ = ["LayerNormLowering", "layernorm_bound", "layernorm_kernel"]
