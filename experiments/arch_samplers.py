"""Random ``config.json`` of each architecture, with its own fields and ranges.

``SAMPLERS[model_type](pick)`` draws a small config of that architecture: a shared base
(:func:`_base`: 1-3 layers, head dim 16..64 given explicitly or implied, grouped-query
ratios, odd intermediate and vocabulary sizes, tied or not, 16-bit dtypes) and then what
the architecture adds: soft-capping values (Gemma 2/3), partial rotary factors (Phi,
StableLM, GLM, GPT-NeoX's ``rotary_pct``), parallel residuals, Falcon's three attention
layouts, Granite's multipliers, Cohere's logit scale and q/k norms, layer types with a
rope base per type (Gemma 3), layers without rotary (SmolLM3), sliding windows shorter
than a run. ``sample_any`` draws the architecture too. ``pick`` is a :class:`Picker`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from experiments.llama_configs import Picker, RngPicker, _rope, sample_config

__all__ = ["SAMPLERS", "Picker", "RngPicker", "sample_any"]

Config = dict[str, Any]


def _base(p: Picker, mt: str, *, kv: bool = True, explicit: bool | None = None,
          even_heads: bool = False) -> Config:
    kvh, ratio = p.int(1, 3), p.int(1, 4)
    heads = kvh * ratio * (2 if even_heads else 1)
    head_dim = 2 * p.int(8, 32)
    explicit = p.choice([False, True]) if explicit is None else explicit
    hidden = heads * (2 * p.int(4, 40) if explicit else head_dim)
    hf: Config = {
        "model_type": mt, "hidden_size": hidden, "intermediate_size": 2 * p.int(8, 120) + 1,
        "num_hidden_layers": p.int(1, 3), "num_attention_heads": heads,
        "vocab_size": 2 * p.int(25, 300) + 1, "max_position_embeddings": 64,
        "tie_word_embeddings": p.choice([False, True]),
        "torch_dtype": p.choice(["float16", "bfloat16"]),
        "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2,
    }
    if kv:
        hf["num_key_value_heads"] = kvh
    if explicit:
        hf["head_dim"] = head_dim
    return hf


def _window(p: Picker, hf: Config) -> None:
    hf["sliding_window"] = p.choice([None, p.int(2, 6)])


def _short_window(p: Picker, hf: Config) -> None:
    """A window always (Gemma 2's cache needs one), often shorter than a run."""
    hf["sliding_window"] = p.int(2, 12)


def _types(p: Picker, hf: Config) -> None:
    """A sliding window shorter than a run and a random sliding/full layer pattern."""
    hf["sliding_window"] = p.int(2, 6)
    hf["layer_types"] = [p.choice(["sliding_attention", "full_attention"])
                         for _ in range(hf["num_hidden_layers"])]


def _partial(p: Picker, hf: Config, key: str = "partial_rotary_factor") -> None:
    """A rotary fraction whose rotated width is even (as every checkpoint's is)."""
    hd = hf.get("head_dim") or hf["hidden_size"] // hf["num_attention_heads"]
    hf[key] = p.choice([f for f in (0.25, 0.5, 0.75, 1.0) if int(hd * f) % 2 == 0
                        and int(hd * f) > 0])


def _llama_like(mt: str, *extras: Callable[[Picker, Config], None], **kw: Any):
    def sample(p: Picker) -> Config:
        hf = _base(p, mt, **kw)
        for e in extras:
            e(p, hf)
        return hf
    return sample


def _bias(*keys: str) -> Callable[[Picker, Config], None]:
    def draw(p: Picker, hf: Config) -> None:
        for k in keys:
            hf[k] = p.choice([False, True])
    return draw


def _gemma_scalars(p: Picker, hf: Config) -> None:
    hd = hf.get("head_dim") or hf["hidden_size"] // hf["num_attention_heads"]
    hf["head_dim"] = hd
    hf["query_pre_attn_scalar"] = p.choice([hd, 2 * hd, 24])
    hf["attn_logit_softcapping"] = p.choice([None, float(p.int(2, 50))])
    hf["final_logit_softcapping"] = p.choice([None, float(p.int(2, 30))])
    hf["hidden_activation"] = p.choice(["gelu_pytorch_tanh", "gelu"])


def _gemma3(p: Picker, hf: Config) -> None:
    _gemma_scalars(p, hf)
    _types(p, hf)
    hf["rope_parameters"] = {
        "sliding_attention": {"rope_type": "default", "rope_theta": p.choice([1e4, 5e4])},
        "full_attention": {"rope_type": "default", "rope_theta": p.choice([1e5, 1e6])}}


def _granite(p: Picker, hf: Config) -> None:
    for k, lo, hi in (("embedding_multiplier", 1, 12), ("residual_multiplier", 1, 10),
                      ("attention_multiplier", 1, 10), ("logits_scaling", 1, 10)):
        hf[k] = p.int(lo, hi) / (4.0 if k != "embedding_multiplier" else 1.0)


def _cohere(p: Picker, hf: Config) -> None:
    hf["logit_scale"] = p.choice([0.0625, 0.25, 1.0])
    hf["use_qk_norm"] = p.choice([False, True])


def _stablelm(p: Picker, hf: Config) -> None:
    _partial(p, hf)
    _bias("use_qkv_bias", "qk_layernorm", "use_parallel_residual")(p, hf)


def _gpt_neox(p: Picker, hf: Config) -> None:
    _partial(p, hf, "rotary_pct")
    _bias("use_parallel_residual", "attention_bias")(p, hf)
    hf["hidden_act"] = p.choice(["gelu", "gelu_new", "relu"])


def _falcon(p: Picker) -> Config:
    hf = _base(p, "falcon", kv=False, explicit=False)
    hf.pop("intermediate_size")
    layout = p.choice(["multi_query", "multi_head", "new"])
    hf["new_decoder_architecture"] = layout == "new"
    hf["multi_query"] = layout == "multi_query"
    hf["parallel_attn"] = True if layout == "new" else p.choice([False, True])
    hf["bias"] = p.choice([False, True])
    if layout == "new":
        hf["num_kv_heads"] = p.choice([d for d in (1, 2, 3, 4)
                                       if hf["num_attention_heads"] % d == 0])
        hf["num_ln_in_parallel_attn"] = p.choice([1, 2])
    hf["ffn_hidden_size"] = 2 * p.int(8, 120)
    return hf


def _smollm3(p: Picker, hf: Config) -> None:
    hf["no_rope_layer_interval"] = p.int(1, 3)


def _exaone4(p: Picker, hf: Config) -> None:
    hf["sliding_window"] = p.int(2, 6)
    hf["sliding_window_pattern"] = p.int(1, 3)


def _phi(p: Picker, hf: Config) -> None:
    _partial(p, hf)
    hf["qk_layernorm"] = p.choice([False, True])
    hf["hidden_act"] = p.choice(["gelu_new", "gelu"])


def _rope_scaling(p: Picker, hf: Config) -> None:
    """A RoPE scaling type or none (LongRoPE's factor lists are the Llama draw's: here
    ``transformers`` sizes them from ``hidden_size / heads``, not the head dim)."""
    hd = hf.get("head_dim") or hf["hidden_size"] // hf["num_attention_heads"]
    rope = _rope(p, hd, hf["model_type"])
    if rope is not None and rope["rope_type"] != "longrope":
        hf["rope_scaling"] = rope


def _experts(key: str, *, moe_width: bool = False, norm: bool = True,
             shared: bool = False) -> Callable[[Picker, Config], None]:
    """A mixture of experts: ``key`` experts (2..8), 1..min(experts, 4) per token, their
    width (``moe_intermediate_size``) where the config has one, renormalised top-k
    weights or not, a shared expert and dense layers between sparse ones."""
    def draw(p: Picker, hf: Config) -> None:
        e = p.int(2, 8)
        hf[key] = e
        hf["num_experts_per_tok"] = p.int(1, min(e, 4))
        if moe_width:
            hf["moe_intermediate_size"] = p.choice([16, 32, 48])
        if norm:
            hf["norm_topk_prob"] = p.choice([False, True])
        if shared:
            hf["shared_expert_intermediate_size"] = p.choice([16, 48])
        if "decoder_sparse_step" in _SPARSE.get(hf["model_type"], ()):
            hf["decoder_sparse_step"] = p.choice([1, 2])
            layers = hf["num_hidden_layers"]
            hf["mlp_only_layers"] = p.choice([[], [0], [layers - 1]])
    return draw


_SPARSE = {"qwen2_moe": ("decoder_sparse_step",), "qwen3_moe": ("decoder_sparse_step",)}


SAMPLERS: dict[str, Callable[[Picker], Config]] = {
    "llama": sample_config,
    "mistral": _llama_like("mistral", _window),
    "qwen2": _llama_like("qwen2", _bias("use_sliding_window"), _window),
    "qwen3": _llama_like("qwen3", _bias("attention_bias"), _rope_scaling),
    "gemma": _llama_like("gemma", _bias("attention_bias"), explicit=True),
    "gemma2": _llama_like("gemma2", _gemma_scalars, _short_window, explicit=True),
    "gemma3_text": _llama_like("gemma3_text", _gemma3, explicit=True),
    "phi3": _llama_like("phi3", _partial, _window),
    "phi": _llama_like("phi", _phi, kv=True, explicit=False),
    "olmo2": _llama_like("olmo2", _bias("attention_bias")),
    "granite": _llama_like("granite", _granite, _bias("attention_bias", "mlp_bias")),
    "cohere": _llama_like("cohere", _cohere, explicit=False, even_heads=True),
    "stablelm": _llama_like("stablelm", _stablelm, explicit=False),
    "starcoder2": _llama_like("starcoder2", _bias("use_bias"), _window, explicit=False),
    "gpt_neox": _llama_like("gpt_neox", _gpt_neox, kv=False, explicit=False),
    "falcon": _falcon,
    "smollm3": _llama_like("smollm3", _smollm3),
    "glm": _llama_like("glm", _partial, _bias("attention_bias"), explicit=True),
    "exaone4": _llama_like("exaone4", _exaone4),
    "olmo": _llama_like("olmo", _bias("attention_bias")),
    "olmo3": _llama_like("olmo3", _types),
    "glm4": _llama_like("glm4", _partial, _bias("attention_bias"), explicit=True),
    "cohere2": _llama_like("cohere2", _types, explicit=False, even_heads=True),
    "mixtral": _llama_like("mixtral", _experts("num_local_experts", norm=False), _window),
    "qwen3_moe": _llama_like("qwen3_moe", _experts("num_experts", moe_width=True)),
    # OLMoE's q norm spans hidden_size: transformers runs it only at head_dim = hidden / heads
    "olmoe": _llama_like("olmoe", _experts("num_experts"), explicit=False),
    "qwen2_moe": _llama_like("qwen2_moe", _experts("num_experts", moe_width=True,
                                                   shared=True)),
}


def sample_any(p: Picker) -> Config:
    """A random config of a random supported architecture."""
    return SAMPLERS[p.choice(sorted(SAMPLERS))](p)
