"""The ``transformers`` module of a :class:`ModelConfig`: built on the meta device for
capture, or on the CPU with seeded random weights when no checkpoint is given.

``norm="layernorm"`` swaps every RMSNorm of the module for ``torch.nn.LayerNorm`` (with
bias), as a user would. A user's own ``PreTrainedModel`` subclass is remembered by name
(``ModelConfig.arch``) so capture builds that class, not the family's.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from .config import ModelConfig, ModelError
from .hf_config import to_hf

__all__ = ["build_module", "config_of_module", "module_class", "torch_dtype"]

_TORCH_DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}
_CLASSES: dict[str, type] = {}
_DEFAULT = {"llama": "LlamaForCausalLM", "mistral": "MistralForCausalLM",
            "qwen2": "Qwen2ForCausalLM"}


def torch_dtype(cfg: ModelConfig) -> torch.dtype:
    """The torch dtype of ``cfg.dtype``."""
    return _TORCH_DTYPES[cfg.dtype]


def _quiet() -> None:
    import transformers

    transformers.logging.set_verbosity_error()


def module_class(cfg: ModelConfig) -> type:
    """The ``transformers`` causal-LM class that ``cfg`` describes."""
    if cfg.arch:
        if cfg.arch not in _CLASSES:
            raise ModelError(f"model class {cfg.arch!r} is not known in this process; pass "
                             "the model itself")
        return _CLASSES[cfg.arch]
    import transformers

    return getattr(transformers, _DEFAULT[cfg.model_type])


def config_of_module(model: Any) -> ModelConfig:
    """The :class:`ModelConfig` of a ``transformers`` model instance (its class remembered)."""
    cfg = ModelConfig.from_hf(model.config, name=getattr(model.config, "_name_or_path", "")
                              or type(model).__name__)
    arch = ""
    if type(model) is not module_class(cfg):
        arch = f"{type(model).__module__}.{type(model).__qualname__}"
        _CLASSES[arch] = type(model)
    norm = "layernorm" if any(isinstance(m, torch.nn.LayerNorm) for m in model.modules()) \
        else "rmsnorm"
    return dataclasses.replace(cfg, arch=arch, norm=norm)


def _swap_norms(model: torch.nn.Module, cfg: ModelConfig, device: str,
                dtype: torch.dtype) -> None:
    for name, mod in list(model.named_modules()):
        if type(mod).__name__.endswith("RMSNorm"):
            parent, _, attr = name.rpartition(".")
            ln = torch.nn.LayerNorm(mod.weight.shape[0], eps=cfg.rms_eps, device=device,
                                    dtype=dtype)
            setattr(model.get_submodule(parent) if parent else model, attr, ln)


def build_module(cfg: ModelConfig, *, device: str = "meta", seed: int = 0,
                 dtype: torch.dtype | None = None) -> torch.nn.Module:
    """The module of ``cfg`` in eval mode, in ``dtype`` (default: the config's).

    On ``meta`` nothing is allocated. On ``cpu`` weights are N(0, 0.02) from a generator
    seeded with ``seed`` (same seed, same weights), norm scales 1.
    """
    if device not in ("cpu", "meta"):
        raise ModelError(f"device {device!r} is not supported; use 'cpu' or 'meta'")
    _quiet()
    dt = dtype or torch_dtype(cfg)
    hf = to_hf(cfg)
    cls = module_class(cfg)
    try:
        with torch.device(device):
            model = cls._from_config(hf, dtype=dt)
    except (TypeError, ValueError, KeyError, RuntimeError, AttributeError) as e:
        raise ModelError(f"model config {cfg.name!r}: transformers cannot build "
                         f"{cls.__name__}: {str(e).strip().splitlines()[-1:]}") from e
    if cfg.norm == "layernorm":
        _swap_norms(model, cfg, device, dt)
    if device == "cpu":
        gen = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for name, p in model.named_parameters():
                if name.endswith("norm.weight"):
                    p.fill_(1.0)
                else:
                    p.copy_(torch.randn(p.shape, generator=gen) * 0.02)
    return model.eval()
