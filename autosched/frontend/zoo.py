"""Built-in model configurations, and the one lookup of a model's configuration.

Each built-in is the published ``config.json`` of the checkpoint named beside it (the
fields autosched reads; the rest do not change the computation). They are configs like
any other: captured from the ``transformers`` module they describe.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .config import ModelConfig, ModelError

__all__ = ["get_model_config", "list_models"]


def _llama(name: str, hidden: int, intermediate: int, layers: int, heads: int, kv_heads: int,
           vocab: int, max_positions: int, dtype: str, theta: float = 10000.0) -> ModelConfig:
    return ModelConfig(model_type="llama", hidden=hidden, intermediate=intermediate,
                       layers=layers, heads=heads, kv_heads=kv_heads, head_dim=hidden // heads,
                       vocab=vocab, rms_eps=1e-5, rope_theta=theta, max_positions=max_positions,
                       dtype=dtype, name=name)


_BUILTINS: dict[str, ModelConfig] = {
    c.name: c
    for c in (
        _llama("llama-tiny", 256, 688, 4, 8, 4, 4096, 512, "fp16"),
        # meta-llama/Llama-2-7b-hf config.json
        _llama("llama2-7b", 4096, 11008, 32, 32, 32, 32000, 4096, "fp16"),
        # meta-llama/Meta-Llama-3-8B config.json
        _llama("llama3-8b", 4096, 14336, 32, 32, 8, 128256, 8192, "bf16", 500000.0),
        # meta-llama/Llama-2-13b-hf config.json
        _llama("llama2-13b", 5120, 13824, 40, 40, 40, 32000, 4096, "fp16"),
        # meta-llama/Llama-2-70b-hf config.json
        _llama("llama2-70b", 8192, 28672, 80, 64, 8, 32000, 4096, "fp16"),
        # meta-llama/Meta-Llama-3-70B config.json
        _llama("llama3-70b", 8192, 28672, 80, 64, 8, 128256, 8192, "bf16", 500000.0),
    )
}


def list_models() -> list[str]:
    """Names of the built-in models, in a stable order."""
    return list(_BUILTINS)


def get_model_config(model: str | Path | ModelConfig | Any) -> ModelConfig:
    """The configuration of ``model``: a built-in name, a Hugging Face ``config.json`` or a
    folder holding one (a checkpoint), a ``transformers`` model or config object, or a
    :class:`ModelConfig` itself.

    Raises :class:`ModelError` listing the built-ins when a name is none of these.
    """
    if isinstance(model, ModelConfig):
        return model
    if hasattr(model, "config") and hasattr(model, "named_parameters"):  # a PreTrainedModel
        from .module import config_of_module

        return config_of_module(model)
    if hasattr(model, "model_type") and hasattr(model, "to_dict"):  # a transformers config
        return ModelConfig.from_hf(model)
    key = str(model)
    if key in _BUILTINS:
        return _BUILTINS[key]
    p = Path(key)
    if p.is_file() or (p.is_dir() and (p / "config.json").is_file()):
        return ModelConfig.from_hf(p)
    raise ModelError(f"unknown model {key!r}: use a built-in ({', '.join(_BUILTINS)}), a "
                     "path to a Hugging Face config.json or checkpoint folder, or a "
                     "transformers model")
