"""A model with numbers: its config, the ``transformers`` reference module in float32 and
the weights the device is given, both holding the same values.

* a checkpoint folder: every tensor is checked against the config (name, shape, a float
  type, finite; :mod:`.weight_files`), then the reference is loaded by ``transformers``
  (safetensors only) and the device's weights are read from the memory-mapped files; a
  folder without safetensors weights is refused, naming what it holds;
* a ``transformers`` model: a float32 copy of it;
* a config (built-in name, config.json, :class:`ModelConfig`): the module with seeded
  random weights.

``dtype`` (the device's number type) rounds the reference's parameters and every tensor
the device reads to it, so both compute on the same values.
"""

from __future__ import annotations

import copy
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from .checkpoint import CheckpointWeights, ModuleWeights, Weights, load_reference
from .config import ModelConfig
from .module import build_module, config_of_module
from .weight_files import check_weights, weight_files
from .zoo import get_model_config

__all__ = ["Source", "load_source"]


@dataclass
class Source:
    """Config, float32 reference module, and the device's view of its weights."""

    cfg: ModelConfig
    reference: torch.nn.Module
    weights: Weights
    # the model before ``quantize`` rounded its linears (None when not quantized on the fly)
    float_reference: torch.nn.Module | None = None


def _round(model: torch.nn.Module, dtype: str | None) -> None:
    if dtype is None:
        return
    from sim.functional import round_to

    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.from_numpy(round_to(p.detach().float().numpy(), dtype)))


def load_source(model: Any, *, dtype: str | None = None, seed: int = 0,
                quantize: str | None = None) -> Source:
    """The :class:`Source` of ``model`` (see the module docstring). ``quantize`` (a weight
    format such as ``w4g128``): every linear but the LM head rounded to it on the fly
    (round to nearest), in the reference and in the device's weights alike."""
    src = _load(model, dtype, seed)
    if not quantize:
        return src
    from .quantized import quantize_module, with_quantization

    cfg = with_quantization(src.cfg, quantize)
    ref = copy.deepcopy(src.reference)
    quantize_module(ref, cfg)
    _round(ref, dtype)
    return Source(cfg, ref, ModuleWeights(ref), float_reference=src.reference)


def _load(model: Any, dtype: str | None, seed: int) -> Source:
    if hasattr(model, "config") and hasattr(model, "named_parameters"):
        cfg = config_of_module(model)
        ref = copy.deepcopy(model).float().eval()
        _round(ref, dtype)
        return Source(cfg, ref, ModuleWeights(ref))
    if isinstance(model, str | bytes) or hasattr(model, "__fspath__"):
        if Path(os.fsdecode(model)).is_dir():  # a checkpoint: its weights, checked, or none
            cfg = get_model_config(model)
            check_weights(weight_files(os.fsdecode(model)), cfg)
            ref = load_reference(model, quantized=bool(cfg.quant))
            _round(ref, dtype)
            return Source(cfg, ref, CheckpointWeights(model, ref, dtype, cfg.quant))
    cfg = get_model_config(model)
    ref = build_module(cfg, device="cpu", seed=seed, dtype=torch.float32)
    _round(ref, dtype)
    return Source(cfg, ref, ModuleWeights(ref))
