"""Built-in model configurations, and the one lookup by name or config path."""

from __future__ import annotations

from pathlib import Path

from .config import ModelConfig, ModelError

__all__ = ["get_model_config", "list_models"]

_BUILTINS: dict[str, ModelConfig] = {
    c.name: c
    for c in (
        ModelConfig(model_type="llama", hidden=256, intermediate=688, layers=4, heads=8,
                    kv_heads=4, head_dim=32, vocab=4096, rms_eps=1e-5, rope_theta=10000.0,
                    max_positions=512, dtype="fp16", name="llama-tiny"),
        # meta-llama/Llama-2-7b-hf config.json
        ModelConfig(model_type="llama", hidden=4096, intermediate=11008, layers=32, heads=32,
                    kv_heads=32, head_dim=128, vocab=32000, rms_eps=1e-5, rope_theta=10000.0,
                    max_positions=4096, dtype="fp16", name="llama2-7b"),
        # meta-llama/Meta-Llama-3-8B config.json
        ModelConfig(model_type="llama", hidden=4096, intermediate=14336, layers=32, heads=32,
                    kv_heads=8, head_dim=128, vocab=128256, rms_eps=1e-5, rope_theta=500000.0,
                    max_positions=8192, dtype="bf16", name="llama3-8b"),
        # meta-llama/Llama-2-13b-hf config.json
        ModelConfig(model_type="llama", hidden=5120, intermediate=13824, layers=40, heads=40,
                    kv_heads=40, head_dim=128, vocab=32000, rms_eps=1e-5, rope_theta=10000.0,
                    max_positions=4096, dtype="fp16", name="llama2-13b"),
        # meta-llama/Llama-2-70b-hf config.json (grouped-query attention, 8 KV heads)
        ModelConfig(model_type="llama", hidden=8192, intermediate=28672, layers=80, heads=64,
                    kv_heads=8, head_dim=128, vocab=32000, rms_eps=1e-5, rope_theta=10000.0,
                    max_positions=4096, dtype="fp16", name="llama2-70b"),
        # meta-llama/Meta-Llama-3-70B config.json
        ModelConfig(model_type="llama", hidden=8192, intermediate=28672, layers=80, heads=64,
                    kv_heads=8, head_dim=128, vocab=128256, rms_eps=1e-5,
                    rope_theta=500000.0, max_positions=8192, dtype="bf16", name="llama3-70b"),
    )
}


def list_models() -> list[str]:
    """Names of the built-in models, in a stable order."""
    return list(_BUILTINS)


def get_model_config(name_or_path: str | Path | ModelConfig) -> ModelConfig:
    """A built-in by name, a Hugging Face ``config.json`` (or its directory), or ``cfg`` itself.

    Raises :class:`ModelError` listing the built-ins when the name is neither.
    """
    if isinstance(name_or_path, ModelConfig):
        return name_or_path
    key = str(name_or_path)
    if key in _BUILTINS:
        return _BUILTINS[key]
    p = Path(key)
    if p.is_file() or (p.is_dir() and (p / "config.json").is_file()):
        return ModelConfig.from_hf(p)
    raise ModelError(f"unknown model {key!r}: use a built-in ({', '.join(_BUILTINS)}) or a "
                     "path to a Hugging Face config.json")
