"""Attention over a KV cache: its schedule space, the cache layout (its one home) and the
layout's rules.

Workload ``attention``: b (batch), q (query tokens), h (query heads), kvh (KV heads),
d (head dim), l (context length including the new tokens).
"""

from search_spaces.attention.geometry import (
    AttnLayout,
    Piece,
    TensorLayout,
    attention_layout_of,
    attention_shape,
)
from search_spaces.attention.rules import ATTN_RULES, AttnShape, cache_rows, channels_used
from search_spaces.attention.space import (
    attention_default,
    attention_space,
    capacity_of,
    qrow_options,
    shape_of,
)

DIMS = {"attention": ("b", "q", "h", "kvh", "d", "l")}

__all__ = ["ATTN_RULES", "DIMS", "AttnLayout", "AttnShape", "Piece", "TensorLayout",
           "attention_default", "attention_shape", "attention_space", "cache_rows",
           "capacity_of", "channels_used", "attention_layout_of", "qrow_options", "shape_of"]
