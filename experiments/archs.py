"""Every dense decoder architecture autosched supports, in one place: its tiny random
checkpoint and its random-config generator.

``ARCHS[model_type]`` is an :class:`Arch`: ``tiny`` holds the fields of its tiny config
(on top of :data:`TINY`: 2 layers, hidden 64, 4 heads, 2 key/value heads where the
config has them, head dim 16, vocabulary 101, token ids inside it) chosen to exercise
what the architecture adds (a window shorter than a run, partial rotary, q/k norms...);
``sample(pick)`` draws a random ``config.json`` of the architecture with its own fields
and ranges (:mod:`experiments.arch_samplers`). :func:`tiny_checkpoint` writes a tiny
checkpoint folder with ``save_pretrained`` (safetensors) from seeded weights whose norm
scales are drawn at random, so a norm read from the wrong tensor changes the logits.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from experiments.arch_samplers import SAMPLERS, Picker

__all__ = ["ARCHS", "MOE", "TINY", "Arch", "tiny_checkpoint", "tiny_config"]

TINY: dict[str, Any] = dict(
    hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
    num_key_value_heads=2, head_dim=16, vocab_size=101, max_position_embeddings=64,
    pad_token_id=0, bos_token_id=1, eos_token_id=2, tie_word_embeddings=False)


@dataclass(frozen=True)
class Arch:
    """One architecture: its ``model_type``, its tiny config's own fields (``drop``: the
    :data:`TINY` keys its config class does not take), and its random-config sampler."""

    model_type: str
    tiny: dict[str, Any] = field(default_factory=dict)
    drop: tuple[str, ...] = ()

    @property
    def sample(self) -> Callable[[Picker], dict[str, Any]]:
        return SAMPLERS[self.model_type]


_NO_KV = ("num_key_value_heads",)
_EP4 = {"num_key_value_heads": 4, "vocab_size": 104}
_ARCHS = (
    Arch("llama"),
    Arch("mistral", {"sliding_window": 4}),
    Arch("qwen2", {"tie_word_embeddings": True}),
    Arch("qwen3"),
    Arch("gemma"),
    Arch("gemma2", {"sliding_window": 4}),
    Arch("gemma3_text", {"sliding_window": 4, "layer_types": ["sliding_attention",
                                                              "full_attention"]}),
    Arch("phi3"),
    Arch("phi"),
    Arch("olmo2"),
    Arch("granite", {"embedding_multiplier": 2.0, "residual_multiplier": 0.5,
                     "attention_multiplier": 0.2, "logits_scaling": 4.0}),
    Arch("cohere", {"use_qk_norm": True, "logit_scale": 0.5}),
    Arch("stablelm"),
    Arch("starcoder2", {"sliding_window": 4}),
    Arch("gpt_neox", {}, _NO_KV + ("head_dim",)),
    Arch("falcon", {"new_decoder_architecture": False, "multi_query": True},
         _NO_KV + ("head_dim", "intermediate_size")),
    Arch("smollm3", {"no_rope_layer_interval": 2}),
    Arch("glm"),
    Arch("exaone4", {"sliding_window": 4, "sliding_window_pattern": 2}),
    Arch("olmo"),
    Arch("olmo3", {"sliding_window": 4, "layer_types": ["sliding_attention",
                                                        "full_attention"]}),
    Arch("glm4"),
    Arch("cohere2", {"sliding_window": 4, "layer_types": ["sliding_attention",
                                                          "full_attention"]}),
    # mixtures of experts: few experts, two per token, each a smaller MLP; four key/value
    # heads and a vocabulary of 4 x 26 so that four devices can split them (and the experts)
    Arch("mixtral", {"num_local_experts": 4, "num_experts_per_tok": 2, **_EP4}),
    Arch("qwen3_moe", {"num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
                       "norm_topk_prob": True, **_EP4}),
    Arch("olmoe", {"num_experts": 8, "num_experts_per_tok": 2, "intermediate_size": 32, **_EP4}),
    Arch("qwen2_moe", {"num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
                       "shared_expert_intermediate_size": 48, "mlp_only_layers": [0], **_EP4}),
)
MOE = ("mixtral", "qwen3_moe", "olmoe", "qwen2_moe")
ARCHS: dict[str, Arch] = {a.model_type: a for a in _ARCHS}


def tiny_config(model_type: str) -> Any:
    """The tiny ``transformers`` config object of ``model_type`` (its own class)."""
    from transformers import CONFIG_MAPPING

    a = ARCHS[model_type]
    fields = {k: v for k, v in TINY.items() if k not in a.drop}
    return CONFIG_MAPPING[model_type](**{**fields, **a.tiny})


def tiny_checkpoint(model_type: str, folder: str | Path, *, seed: int = 0,
                    dtype: str = "float16") -> Path:
    """Write the tiny checkpoint of ``model_type`` into ``folder`` (seeded weights, norm
    scales drawn at random) and return the folder."""
    import torch
    from transformers import AutoModelForCausalLM

    from autosched.frontend.module import init_weights

    folder = Path(folder)
    model = AutoModelForCausalLM.from_config(tiny_config(model_type))
    init_weights(model, seed=seed, norms="random")
    model.to(getattr(torch, dtype)).save_pretrained(folder, safe_serialization=True)
    return folder
