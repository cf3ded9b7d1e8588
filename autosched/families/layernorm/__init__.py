"""LayerNorm with weight and bias: the host kernel, the family and its bound."""

from .bound import layernorm_bound
from .kernel import layernorm_kernel
from .lowering import LayerNormFamily

__all__ = ["LayerNormFamily", "layernorm_bound", "layernorm_kernel"]
