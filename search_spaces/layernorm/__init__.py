"""LayerNorm with weight and bias (GPT-NeoX, Phi, OPT): its schedule space."""

from search_spaces.layernorm.space import LAYERNORM_VERSION, layernorm_default, layernorm_space

__all__ = ["LAYERNORM_VERSION", "layernorm_default", "layernorm_space"]
