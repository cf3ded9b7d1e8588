"""Attention over a KV cache: PIM streams that write and read the cache (``streams``), the
host's softmax and reductions (``lowering``), and the family's bound. The cache layout
lives with the space, in ``search_spaces.attention``."""

from .bound import attention_bound, attention_bound_terms
from .lowering import AttentionLowering, attention_kernel

__all__ = ["AttentionLowering", "attention_bound", "attention_bound_terms", "attention_kernel"]
