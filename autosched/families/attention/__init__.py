"""Attention over a KV cache: PIM streams that write and read the cache (``streams``), the
host's softmax and reductions (``lowering``), the family's bound and its answers for the
cache (``family``, ``fit``). The cache layout lives with the space, in
``search_spaces.attention``."""

from .bound import attention_bound, attention_bound_terms
from .family import AttentionFamily
from .lowering import attention_kernel

__all__ = ["AttentionFamily", "attention_bound", "attention_bound_terms", "attention_kernel"]
