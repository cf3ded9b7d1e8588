"""How each architecture's config is read: a small table of data, one row per
``model_type``, and the one function that turns a ``transformers`` config object into
the summary fields of :class:`~autosched.frontend.config.ModelConfig`.

A field is read through its aliases (``hidden_size`` or ``n_embd``, ``layer_norm_eps``
or ``rms_norm_eps``...): the first one the config object has, not None. A row says what
differs: the norm the architecture uses, the keys a ``config.json`` must give, and the
few fields whose meaning depends on others (Falcon's key/value heads). Everything else
about the computation is in the module ``transformers`` builds from the config itself.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ALIASES", "READERS", "Reader", "dense_layers", "layer_kinds", "summary_fields"]

ALIASES: dict[str, tuple[str, ...]] = {
    "hidden": ("hidden_size", "n_embd", "d_model"),
    "intermediate": ("intermediate_size", "ffn_hidden_size", "n_inner", "ffn_dim"),
    "layers": ("num_hidden_layers", "n_layer", "num_layers"),
    "heads": ("num_attention_heads", "n_head", "num_heads"),
    "kv_heads": ("num_key_value_heads", "num_kv_heads"),
    "head_dim": ("head_dim",),
    "vocab": ("vocab_size",),
    "max_positions": ("max_position_embeddings", "n_positions"),
    "eps": ("rms_norm_eps", "layer_norm_eps", "layer_norm_epsilon", "norm_epsilon",
            "norm_eps"),
    "act": ("hidden_activation", "hidden_act", "activation", "activation_function"),
    "attention_bias": ("attention_bias", "use_qkv_bias", "use_bias", "bias"),
    "mlp_bias": ("mlp_bias", "use_bias", "bias"),
}
_BASE = ("hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size")
_LLAMA = (*_BASE, "intermediate_size")


def _falcon_kv(c: Any) -> int:
    """Falcon's key/value heads: ``num_kv_heads`` with the new decoder architecture,
    one with multi-query attention, else one per query head."""
    if c.new_decoder_architecture:
        return c.num_kv_heads
    return 1 if c.multi_query else c.num_attention_heads


@dataclass(frozen=True)
class Reader:
    """One architecture's row: its norm (``rms`` | ``layer``), the keys its
    ``config.json`` must give, and readers for fields the aliases do not settle."""

    norm: str = "rms"
    required: tuple[str, ...] = _LLAMA
    special: dict[str, Callable[[Any], Any]] = field(default_factory=dict)


_LN = Reader(norm="layer")
READERS: dict[str, Reader] = {
    **{mt: Reader() for mt in (
        "llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3_text", "phi3",
        "olmo2", "olmo3", "granite", "smollm3", "glm", "glm4", "exaone4", "helium",
        "ministral", "seed_oss", "internlm3", "arcee", "mixtral", "qwen3_moe", "olmoe",
        "qwen2_moe")},
    "qwen2": Reader(special={"attention_bias": lambda c: True}),
    **{mt: _LN for mt in ("phi", "stablelm", "starcoder2", "gpt_neox", "cohere", "cohere2",
                          "olmo")},
    "falcon": Reader(norm="layer", required=_BASE,
                     special={"kv_heads": _falcon_kv, "mlp_bias": lambda c: bool(c.bias)}),
}


def _alias(c: Any, key: str) -> Any:
    for name in ALIASES[key]:
        v = getattr(c, name, None)
        if v is not None:
            return v
    return None


def summary_fields(c: Any) -> dict[str, Any]:
    """The summary of config object ``c`` (see the module docstring): field -> value,
    every field present (None where the config gives none)."""
    reader = READERS[c.model_type]
    out = {k: _alias(c, k) for k in ALIASES}
    for k, fn in reader.special.items():
        out[k] = fn(c)
    out["kv_heads"] = out["kv_heads"] or out["heads"]
    if not out["head_dim"] and out["hidden"] and out["heads"]:
        out["head_dim"] = out["hidden"] // out["heads"]
    if out["intermediate"] is None and out["hidden"]:
        out["intermediate"] = 4 * out["hidden"]
    out["norm"] = reader.norm
    return out


def dense_layers(c: Any) -> frozenset[int]:
    """The layers of a mixture-of-experts config that keep a dense MLP (``mlp_only_layers``,
    or not a multiple of ``decoder_sparse_step``); empty for every other config."""
    n = _alias(c, "layers")
    if not (getattr(c, "num_experts", None) or getattr(c, "num_local_experts", None)):
        return frozenset()
    only = set(getattr(c, "mlp_only_layers", None) or ())
    step = getattr(c, "decoder_sparse_step", None) or 1
    return frozenset(i for i in range(n) if i in only or (i + 1) % step)


def layer_kinds(c: Any) -> tuple[str, ...]:
    """Per layer, what makes it compute differently from its neighbours besides a
    sliding window's length: its ``layer_types`` entry when they differ (a rope base or
    rotary per type), ``nope`` when it skips rotary (``no_rope_layers``); () when all
    layers are alike."""
    n = _alias(c, "layers")
    types = list(getattr(c, "layer_types", None) or [""] * n)
    if len(set(types)) == 1:
        types = [""] * n
    nope = getattr(c, "no_rope_layers", None) or [1] * n
    dense = dense_layers(c)
    kinds = tuple(t + ("+nope" if not r else "") + ("+dense" if i in dense else "")
                  for i, (t, r) in enumerate(zip(types, nope, strict=True)))
    return () if len(set(kinds)) == 1 else kinds
