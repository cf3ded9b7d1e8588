"""Hugging Face ``config.json`` <-> :class:`ModelConfig`, with ``transformers`` reading it.

``parse`` checks every field it reads for type and a sane range (one line naming the
field), refuses files over :data:`MAX_CONFIG_BYTES` before reading them, then lets
``transformers`` normalise the config (``rope_scaling`` or ``rope_parameters``, default
head dim, per-layer attention types) and summarises the result. ``to_hf`` is the inverse:
the ``transformers`` config object of a :class:`ModelConfig`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sim.files import load_json, shown

from .config import LIMITS, MODEL_TYPES, ModelConfig, ModelError, fail
from .config_numbers import check_rope
from .readers import READERS, layer_kinds, summary_fields

__all__ = ["MAX_CONFIG_BYTES", "load_config_json", "parse", "subset", "to_hf"]

MAX_CONFIG_BYTES = 1 << 20
_DTYPES = {"float16": "fp16", "fp16": "fp16", "half": "fp16", "bfloat16": "bf16",
           "bf16": "bf16", "float32": "fp16", "fp32": "fp16", "float": "fp16"}
_INTS = {"hidden_size": "hidden", "n_embd": "hidden", "d_model": "hidden",
         "intermediate_size": "intermediate", "ffn_hidden_size": "intermediate",
         "n_inner": "intermediate", "num_hidden_layers": "layers", "n_layer": "layers",
         "num_attention_heads": "heads", "n_head": "heads", "num_key_value_heads": "kv_heads",
         "num_kv_heads": "kv_heads", "head_dim": "head_dim", "vocab_size": "vocab",
         "max_position_embeddings": "max_positions", "n_positions": "max_positions",
         "sliding_window": "max_positions", "max_window_layers": "layers",
         "no_rope_layer_interval": "layers", "sliding_window_pattern": "layers"}
_BOOLS = ("tie_word_embeddings", "attention_bias", "mlp_bias", "use_sliding_window",
          "multi_query", "new_decoder_architecture", "parallel_attn", "bias", "use_bias",
          "use_parallel_residual", "use_qk_norm", "qk_layernorm", "use_qkv_bias", "alibi")
_EPS = (0.0, 1.0)
_SCALE = (0.0, 1e6)
_FLOATS = {"rms_norm_eps": _EPS, "layer_norm_eps": _EPS, "layer_norm_epsilon": _EPS,
           "norm_epsilon": _EPS, "norm_eps": _EPS, "rope_theta": (0.0, 1e12),
           "rope_local_base_freq": (0.0, 1e12), "partial_rotary_factor": (0.0, 1.0),
           "rotary_pct": (0.0, 1.0), "attn_logit_softcapping": _SCALE,
           "final_logit_softcapping": _SCALE, "embedding_multiplier": _SCALE,
           "residual_multiplier": _SCALE, "attention_multiplier": _SCALE,
           "logits_scaling": _SCALE, "logit_scale": _SCALE,
           "query_pre_attn_scalar": _SCALE}
_STRS = ("hidden_act", "hidden_activation", "activation", "torch_dtype", "dtype",
         "_name_or_path")


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
        v, lo = hf.get(key), 0 if key in ("max_window_layers", "no_rope_layer_interval",
                                          "sliding_window") else 1  # 0: no window
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
    missing = [k for k in READERS[hf["model_type"]].required if hf.get(k) is None]
    if missing:
        raise fail(label, f"missing required key(s) {', '.join(missing)}")
    lt = hf.get("layer_types")
    if lt is not None and (not isinstance(lt, list) or len(lt) != hf.get("num_hidden_layers")
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
    window = getattr(c, "sliding_window", None) or 0
    types = getattr(c, "layer_types", None)
    if not window or types is None:
        return window, ()
    full = tuple(i for i, t in enumerate(types) if t != "sliding_attention")
    return (0, ()) if len(full) == len(types) else (window, full)


def _rope(c: Any, label: str) -> tuple[float, tuple[tuple[str, Any], ...]]:
    """(rope_theta, the scaling parameters) of the config; per-layer-type parameters
    (Gemma 3) are read from the full-attention layers' entry."""
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    rope = dict(getattr(c, "rope_parameters", None) or {})
    if rope and all(isinstance(v, dict) for v in rope.values()):
        rope = dict(rope.get("full_attention") or next(iter(rope.values())))
    theta = float(rope.pop("rope_theta", getattr(c, "rope_theta", None) or 10000.0))
    rope.pop("partial_rotary_factor", None)  # the rotary module's own business
    rtype = rope.get("rope_type", rope.get("type", "default"))
    if rtype != "default" and rtype not in ROPE_INIT_FUNCTIONS:
        raise fail(label, f"rope_type {rtype!r} is unknown to transformers (known: "
                          f"default, {', '.join(sorted(ROPE_INIT_FUNCTIONS))})")
    return theta, () if rtype == "default" else tuple(sorted(
        (k, tuple(v) if isinstance(v, list) else v) for k, v in rope.items()))


def _canonical(hf: dict[str, Any]) -> str:
    return json.dumps(hf, sort_keys=True, default=str)


def parse(src: Any, *, name: str | None = None, dtype: str | None = None) -> ModelConfig:
    """``ModelConfig`` of a config.json (file, folder holding one, dict or config object).

    ``dtype`` overrides the config's ``torch_dtype``; float32 checkpoints run in float16
    (the device computes in 16 bits). Raises :class:`ModelError` naming the field for
    anything mistyped, out of range or that ``transformers`` itself cannot run. The
    config itself, as ``transformers`` reads it, is kept in the result (``hf``).
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

    f = summary_fields(c)
    theta, scaling = _rope(c, label)
    if f["act"] not in ACT2FN:
        raise fail(label, f"hidden_act {f['act']!r} is unknown to transformers")
    raw_dtype = dtype or hf.get("torch_dtype") or hf.get("dtype") or "float16"
    if raw_dtype not in _DTYPES:
        raise fail(label, f"torch_dtype {raw_dtype!r} is not supported; use float16, "
                          "bfloat16 or float32 (pass dtype='fp16' to override)")
    window, full = _windows(c)
    from .quantized import quant_fields

    return ModelConfig(**quant_fields(hf, label),
        model_type=mt, hidden=f["hidden"], intermediate=f["intermediate"],
        layers=f["layers"], heads=f["heads"], kv_heads=f["kv_heads"],
        head_dim=f["head_dim"], vocab=f["vocab"],
        rms_eps=float(f["eps"] if f["eps"] is not None else 1e-5), rope_theta=theta,
        max_positions=f["max_positions"] or 2048,
        tie_embeddings=bool(getattr(c, "tie_word_embeddings", False)),
        attention_bias=bool(f["attention_bias"]), dtype=_DTYPES[raw_dtype], name=label,
        norm=f["norm"], mlp_bias=bool(f["mlp_bias"]), hidden_act=f["act"],
        rope_scaling=scaling, sliding_window=window, full_layers=full,
        hf=_canonical(c.to_dict()), layer_kinds=layer_kinds(c))


def _summary_hf(cfg: ModelConfig) -> dict[str, Any]:
    """The Llama-family config.json a summary-only :class:`ModelConfig` describes."""
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
    return d


def to_hf(cfg: ModelConfig) -> Any:
    """The ``transformers`` config object of ``cfg``: the one it was read from (``hf``),
    else the Llama-family config its summary describes (which :func:`parse` reads back
    as ``cfg``)."""
    d = json.loads(cfg.hf) if cfg.hf else _summary_hf(cfg)
    c = _hf_object(d, cfg.name or cfg.model_type)
    if summary_fields(c)["layers"] != cfg.layers:
        raise ModelError(f"model config {cfg.name!r}: its Hugging Face config has "
                         f"{summary_fields(c)['layers']} layers, the summary {cfg.layers}; "
                         "take fewer layers with ModelConfig.subset")
    return c


_PER_LAYER = ("layer_types", "no_rope_layers")


def subset(cfg: ModelConfig, layers: tuple[int, ...]) -> ModelConfig:
    """``cfg`` with only the decoder layers ``layers`` (see :meth:`ModelConfig.subset`)."""
    import dataclasses

    if not layers or any(not 0 <= i < cfg.layers for i in layers):
        raise fail(cfg.name, f"layers {layers} are not among 0..{cfg.layers - 1}")
    full = tuple(j for j, i in enumerate(layers) if i in cfg.full_layers)
    kinds = tuple(cfg.layer_kinds[i] for i in layers) if cfg.layer_kinds else ()
    route = tuple(cfg.routing[i] for i in layers) if len(cfg.routing) > 1 else cfg.routing
    if not cfg.hf:
        return dataclasses.replace(cfg, layers=len(layers), full_layers=full,
                                   layer_kinds=kinds, routing=route)
    c = to_hf(cfg)
    d = c.to_dict()
    for key in _PER_LAYER:
        if isinstance(d.get(key), list):
            d[key] = [d[key][i] for i in layers]
    if "mlp_only_layers" in d or "decoder_sparse_step" in d:  # which layers stay dense
        from .readers import dense_layers

        dense = dense_layers(c)
        d["mlp_only_layers"] = [j for j, i in enumerate(layers) if i in dense]
        d["decoder_sparse_step"] = 1
    name = next(k for k in ("num_hidden_layers", "n_layer", "num_layers") if k in d)
    d[name] = len(layers)
    return dataclasses.replace(cfg, layers=len(layers), full_layers=full, layer_kinds=kinds,
                               hf=_canonical(d), routing=route)
