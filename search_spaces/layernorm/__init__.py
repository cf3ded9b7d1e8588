"""LayerNorm with weight and bias (GPT-NeoX, Phi, OPT): its schedule space."""

from search_spaces.layernorm.space import LAYERNORM_VERSION, layernorm_default, layernorm_space

DIMS = {"layernorm": ("m", "n")}  # rows, features (weight and bias)

__all__ = ["DIMS", "LAYERNORM_VERSION", "layernorm_default", "layernorm_space"]
