"""Hugging Face ``config.json`` <-> :class:`ModelConfig`, with ``transformers`` reading it.

``parse`` checks every field it reads for type and a sane range (one line naming the
field), refuses files over :data:`MAX_CONFIG_BYTES` before reading them, then lets
``transformers`` normalise the config (``rope_scaling`` or ``rope_parameters``, default
head dim, per-layer attention types) and summarises the result. ``to_hf`` is the inverse:
the ``transformers`` config object of a :class:`ModelConfig`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sim.files import load_json, shown

from .config import LIMITS, MODEL_TYPES, ModelConfig, ModelError, fail
from .config_numbers import check_rope

__all__ = ["MAX_CONFIG_BYTES", "load_config_json", "parse", "to_hf"]

MAX_CONFIG_BYTES = 1 << 20
_DTYPES = {"float16": "fp16", "fp16": "fp16", "half": "fp16", "bfloat16": "bf16",
           "bf16": "bf16", "float32": "fp16", "fp32": "fp16", "float": "fp16"}
_INTS = {"hidden_size": "hidden", "intermediate_size": "intermediate",
         "num_hidden_layers": "layers", "num_attention_heads": "heads",
         "num_key_value_heads": "kv_heads", "head_dim": "head_dim", "vocab_size": "vocab",
         "max_position_embeddings": "max_positions", "sliding_window": "max_positions",
         "max_window_layers": "layers"}
_REQUIRED = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
             "vocab_size")
_BOOLS = ("tie_word_embeddings", "attention_bias", "mlp_bias", "use_sliding_window")
_FLOATS = {"rms_norm_eps": (0.0, 1.0), "rope_theta": (0.0, 1e12)}
_STRS = ("hidden_act", "torch_dtype", "dtype", "_name_or_path")


def load_config_json(path: Path) -> dict[str, Any]:
    """The JSON object of ``path``, read by :func:`sim.files.load_json` (a regular file of
    at most 1 MB, nesting bounded, numbers finite); anything else: refused."""
    data = load_json(path, limit=MAX_CONFIG_BYTES, what="model config", error=ModelError)
    if not isinstance(data, dict):
        raise ModelError(f"{path}: a model config must be a JSON object, got a "
                         f"{type(data).__name__}")
    return data


def _check_types(hf: dict[str, Any], label: str) -> None:
    for key, lim in _INTS.items():
        v, lo = hf.get(key), 0 if key == "max_window_layers" else 1
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= LIMITS[lim]:
            raise fail(label, f"{key} must be an integer in [{lo}, {LIMITS[lim]}], got {shown(v)}")
    for key in _BOOLS:
        if key in hf and hf[key] is not None and not isinstance(hf[key], bool):
            raise fail(label, f"{key} must be true or false, got {hf[key]!r}")
    for key, (lo, hi) in _FLOATS.items():
        v = hf.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int | float)
                              or not lo < v <= hi):
            raise fail(label, f"{key} must be a number in ({lo:g}, {hi:g}], got {shown(v)}")
    for key in _STRS:
        if hf.get(key) is not None and not isinstance(hf[key], str):
            raise fail(label, f"{key} must be a string, got {hf[key]!r}")
    for key in ("rope_scaling", "rope_parameters"):
        if hf.get(key) is not None and not isinstance(hf[key], dict):
            raise fail(label, f"{key} must be an object or null, got {hf[key]!r}")
    check_rope(hf, label)
    missing = [k for k in _REQUIRED if hf.get(k) is None]
    if missing:
        raise fail(label, f"missing required key(s) {', '.join(missing)}")
    lt = hf.get("layer_types")
    if lt is not None and (not isinstance(lt, list) or len(lt) != hf["num_hidden_layers"]
                           or not all(isinstance(t, str) for t in lt)):
        raise fail(label, "layer_types must list one string per hidden layer")


def _source(src: Any) -> tuple[dict[str, Any], str | None]:
    if isinstance(src, dict):
        return src, None
    if hasattr(src, "to_dict") and hasattr(src, "model_type"):  # a transformers config
        return src.to_dict(), None
    p = Path(src)
    if p.is_dir():
        p = p / "config.json"
    if not p.is_file():
        raise ModelError(f"no model config at {str(src)!r}: give a built-in name, a "
                         "config.json file or a directory containing one")
    return load_config_json(p), (p.parent.name if p.name == "config.json" else p.stem)


def _hf_object(hf: dict[str, Any], label: str) -> Any:
    from huggingface_hub.errors import StrictDataclassError
    from transformers import CONFIG_MAPPING
    from transformers import logging as hf_logging

    hf_logging.set_verbosity_error()  # its advice goes to stderr; our errors are one line
    try:
        return CONFIG_MAPPING[hf["model_type"]].from_dict(dict(hf))
    except (TypeError, ValueError, KeyError, AttributeError, StrictDataclassError) as e:
        first = str(e).strip().splitlines()
        raise fail(label, "transformers rejects it: " + " ".join(first[-1:] or [repr(e)])) from e


def _windows(c: Any) -> tuple[int, tuple[int, ...]]:
    """(sliding window or 0, layers exempt from it) as ``transformers`` reads the config."""
    if c.model_type == "llama":
        return 0, ()
    window = getattr(c, "sliding_window", None) or 0
    types = getattr(c, "layer_types", None)
    if not window or types is None:
        return window, ()
    full = tuple(i for i, t in enumerate(types) if t != "sliding_attention")
    return (0, ()) if len(full) == len(types) else (window, full)


def parse(src: Any, *, name: str | None = None, dtype: str | None = None) -> ModelConfig:
    """``ModelConfig`` of a config.json (file, folder holding one, dict or config object).

    ``dtype`` overrides the config's ``torch_dtype``; float32 checkpoints run in float16
    (the device computes in 16 bits). Raises :class:`ModelError` naming the field for
    anything mistyped, out of range or that ``transformers`` itself cannot run.
    """
    hf, default_name = _source(src)
    label = name or hf.get("_name_or_path") or default_name or str(hf.get("model_type"))
    mt = hf.get("model_type")
    if mt not in MODEL_TYPES:
        raise fail(label, f"model_type {mt!r} is not supported; use one of "
                          f"{', '.join(MODEL_TYPES)}")
    _check_types(hf, label)
    if "head_dim" not in hf and hf["hidden_size"] % hf["num_attention_heads"]:
        raise fail(label, f"hidden_size ({hf['hidden_size']}) is not num_attention_heads "
                          f"({hf['num_attention_heads']}) x an integer head_dim; give head_dim")
    c = _hf_object(hf, label)
    from transformers.activations import ACT2FN
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    rope = dict(c.rope_parameters or {})
    theta = float(rope.pop("rope_theta", 10000.0))
    rtype = rope.get("rope_type", rope.get("type", "default"))
    if rtype != "default" and rtype not in ROPE_INIT_FUNCTIONS:
        raise fail(label, f"rope_type {rtype!r} is unknown to transformers (known: "
                          f"default, {', '.join(sorted(ROPE_INIT_FUNCTIONS))})")
    if c.hidden_act not in ACT2FN:
        raise fail(label, f"hidden_act {c.hidden_act!r} is unknown to transformers")
    raw_dtype = dtype or hf.get("torch_dtype") or hf.get("dtype") or "float16"
    if raw_dtype not in _DTYPES:
        raise fail(label, f"torch_dtype {raw_dtype!r} is not supported; use float16, "
                          "bfloat16 or float32 (pass dtype='fp16' to override)")
    window, full = _windows(c)
    scaling = () if rtype == "default" else tuple(sorted(
        (k, tuple(v) if isinstance(v, list) else v) for k, v in rope.items()))
    return ModelConfig(
        model_type=mt, hidden=c.hidden_size, intermediate=c.intermediate_size,
        layers=c.num_hidden_layers, heads=c.num_attention_heads,
        kv_heads=c.num_key_value_heads or c.num_attention_heads,
        head_dim=getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads,
        vocab=c.vocab_size, rms_eps=float(c.rms_norm_eps), rope_theta=theta,
        max_positions=c.max_position_embeddings,
        tie_embeddings=bool(c.tie_word_embeddings),
        attention_bias=True if mt == "qwen2" else bool(getattr(c, "attention_bias", False)),
        dtype=_DTYPES[raw_dtype], name=label, mlp_bias=bool(getattr(c, "mlp_bias", False)),
        hidden_act=c.hidden_act, rope_scaling=scaling, sliding_window=window,
        full_layers=full)


def to_hf(cfg: ModelConfig) -> Any:
    """The ``transformers`` config object that :func:`parse` reads back as ``cfg``."""
    d: dict[str, Any] = {
        "model_type": cfg.model_type, "hidden_size": cfg.hidden,
        "intermediate_size": cfg.intermediate, "num_hidden_layers": cfg.layers,
        "num_attention_heads": cfg.heads, "num_key_value_heads": cfg.kv_heads,
        "head_dim": cfg.head_dim, "vocab_size": cfg.vocab, "rms_norm_eps": cfg.rms_eps,
        "max_position_embeddings": cfg.max_positions,
        "tie_word_embeddings": cfg.tie_embeddings, "hidden_act": cfg.hidden_act,
        "rope_parameters": {"rope_theta": cfg.rope_theta, "rope_type": "default",
                            **{k: list(v) if isinstance(v, tuple) else v
                               for k, v in cfg.rope_scaling}},
        "dtype": {"fp16": "float16", "bf16": "bfloat16"}[cfg.dtype],
        "_name_or_path": cfg.name,
    }
    if cfg.model_type == "llama":
        d.update(attention_bias=cfg.attention_bias, mlp_bias=cfg.mlp_bias)
    elif cfg.model_type == "mistral":
        d["sliding_window"] = cfg.sliding_window or None
    else:
        d.update(use_sliding_window=bool(cfg.sliding_window),
                 sliding_window=cfg.sliding_window or None, max_window_layers=cfg.layers,
                 layer_types=["full_attention" if cfg.window(i) == 0 else "sliding_attention"
                              for i in range(cfg.layers)])
    return _hf_object(d, cfg.name or cfg.model_type)
