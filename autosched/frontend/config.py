"""Model configuration: the shapes of a Llama-family decoder, parsed from a Hugging Face
style ``config.json`` and checked against what autosched can model."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from sim.errors import AutoschedError

__all__ = ["MODEL_TYPES", "ModelConfig", "ModelError"]

MODEL_TYPES = ("llama", "mistral", "qwen2")
NORMS = ("rmsnorm", "layernorm")
_DTYPES = {"float16": "fp16", "fp16": "fp16", "half": "fp16",
           "bfloat16": "bf16", "bf16": "bf16"}
_REQUIRED = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
             "vocab_size")


class ModelError(AutoschedError):
    """A model or its configuration is outside what the frontend can capture."""


def _fail(name: str, why: str) -> ModelError:
    return ModelError(f"model config {name!r}: {why}")


@dataclass(frozen=True)
class ModelConfig:
    """Shapes and numerics of one decoder; immutable, validated on construction."""

    model_type: str
    hidden: int
    intermediate: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    rms_eps: float = 1e-5
    rope_theta: float = 10000.0
    max_positions: int = 2048
    tie_embeddings: bool = False
    attention_bias: bool = False
    dtype: str = "fp16"
    name: str = ""
    norm: str = "rmsnorm"  # rmsnorm (the Llama family) | layernorm (with bias); eps: rms_eps

    def __post_init__(self) -> None:
        n = self.name or self.model_type
        if self.model_type not in MODEL_TYPES:
            raise _fail(n, f"model_type {self.model_type!r} is not supported; use one of "
                           f"{', '.join(MODEL_TYPES)}")
        for f in ("hidden", "intermediate", "layers", "heads", "kv_heads", "head_dim", "vocab",
                  "max_positions"):
            v = getattr(self, f)
            if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                raise _fail(n, f"{f} must be a positive integer, got {v!r}")
        if self.heads % self.kv_heads:
            raise _fail(n, f"heads ({self.heads}) must be a multiple of kv_heads "
                           f"({self.kv_heads}) for grouped-query attention")
        if self.head_dim % 2:
            raise _fail(n, f"head_dim ({self.head_dim}) must be even for rotary embedding")
        if not (self.rms_eps > 0 and self.rope_theta > 0):
            raise _fail(n, "rms_eps and rope_theta must be positive")
        if self.dtype not in ("fp16", "bf16"):
            raise _fail(n, f"dtype {self.dtype!r} is not supported; use fp16 or bf16")
        if self.norm not in NORMS:
            raise _fail(n, f"norm {self.norm!r} is not supported; use one of {', '.join(NORMS)}")

    @property
    def q_dim(self) -> int:
        return self.heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.head_dim

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ModelConfig:
        """Inverse of :meth:`to_dict` (our own field names, not Hugging Face's)."""
        return cls(**d)

    @classmethod
    def from_hf(cls, src: str | Path | dict[str, Any], *, name: str | None = None,
                dtype: str | None = None) -> ModelConfig:
        """Parse a Hugging Face ``config.json`` (file, directory holding one, or dict).

        ``dtype`` overrides ``torch_dtype``. Raises :class:`ModelError` naming the field
        for anything we do not model (unknown model_type, rope scaling, an active sliding
        window, an activation other than SiLU, MLP bias, inconsistent head counts).
        """
        if isinstance(src, dict):
            hf, default_name = src, None
        else:
            p = Path(src)
            if p.is_dir():
                p = p / "config.json"
            if not p.is_file():
                raise ModelError(f"no model config at {str(src)!r}: give a built-in name, a "
                                 "config.json file or a directory containing one")
            try:
                hf = json.loads(p.read_text())
            except json.JSONDecodeError as e:
                raise ModelError(f"{p} is not valid JSON: {e}") from e
            default_name = p.parent.name if p.name == "config.json" else p.stem
        label = name or hf.get("_name_or_path") or default_name or str(hf.get("model_type"))
        return cls(**_parse(hf, label, dtype))


def _parse(hf: dict[str, Any], label: str, dtype: str | None) -> dict[str, Any]:
    """Translate and check Hugging Face keys; returns ModelConfig keyword arguments."""
    mt = hf.get("model_type")
    if mt not in MODEL_TYPES:
        raise _fail(label, f"model_type {mt!r} is not supported; use one of "
                           f"{', '.join(MODEL_TYPES)}")
    missing = [k for k in _REQUIRED if k not in hf]
    if missing:
        raise _fail(label, f"missing required key(s) {', '.join(missing)}")
    act = hf.get("hidden_act", "silu")
    if act != "silu":
        raise _fail(label, f"hidden_act {act!r} is not modelled; only 'silu' (SwiGLU) is")
    rs = hf.get("rope_scaling")
    if rs and (rs.get("rope_type") or rs.get("type")) != "default":
        raise _fail(label, f"rope_scaling {rs!r} is not modelled; remove it or use plain RoPE")
    if hf.get("mlp_bias"):
        raise _fail(label, "mlp_bias=true is not modelled; the MLP projections have no bias")
    heads = hf["num_attention_heads"]
    hidden = hf["hidden_size"]
    max_pos = hf.get("max_position_embeddings", 2048)
    window = hf.get("sliding_window")
    if mt == "qwen2" and not hf.get("use_sliding_window", False):
        window = None
    if window is not None and window < max_pos:
        raise _fail(label, f"sliding_window={window} is smaller than max_position_embeddings="
                           f"{max_pos}; windowed attention is not modelled")
    head_dim = hf.get("head_dim")
    if head_dim is None:
        if not isinstance(heads, int) or heads <= 0 or hidden % heads:
            raise _fail(label, f"hidden_size ({hidden}) is not num_attention_heads ({heads}) x "
                               "an integer head_dim; give head_dim explicitly")
        head_dim = hidden // heads
    raw_dtype = dtype or hf.get("torch_dtype") or hf.get("dtype") or "float16"
    if raw_dtype not in _DTYPES:
        raise _fail(label, f"torch_dtype {raw_dtype!r} is not supported; the accelerator "
                           "computes in float16 or bfloat16 (pass dtype='fp16' to override)")
    bias = True if mt == "qwen2" else bool(hf.get("attention_bias", False))
    return dict(
        model_type=mt, hidden=hidden, intermediate=hf["intermediate_size"],
        layers=hf["num_hidden_layers"], heads=heads,
        kv_heads=hf.get("num_key_value_heads") or heads, head_dim=head_dim,
        vocab=hf["vocab_size"], rms_eps=float(hf.get("rms_norm_eps", 1e-6)),
        rope_theta=float(hf.get("rope_theta", 10000.0)), max_positions=max_pos,
        tie_embeddings=bool(hf.get("tie_word_embeddings", False)), attention_bias=bias,
        dtype=_DTYPES[raw_dtype], name=label,
    )
