"""The ``transformers`` module of a :class:`ModelConfig`: built on the meta device for
capture, or on the CPU with seeded random weights when no checkpoint is given.

The class is the architecture's own causal LM (``AutoModelForCausalLM``'s mapping of its
``model_type``), built from the config the summary was read from.

``norm="layer"`` swaps every RMSNorm of the module for ``torch.nn.LayerNorm`` (with
bias), as a user would. A user's own ``PreTrainedModel`` subclass is remembered by name
(``ModelConfig.arch``) so capture builds that class, not the family's.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from .config import ModelConfig, ModelError
from .hf_config import to_hf

__all__ = ["build_module", "config_of_module", "init_weights", "module_class", "torch_dtype"]

_TORCH_DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}
_CLASSES: dict[str, type] = {}


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
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    name = MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.get(cfg.model_type)
    if name is None or not hasattr(transformers, name):
        raise ModelError(f"transformers has no causal-LM class for {cfg.model_type!r}")
    return getattr(transformers, name)


def config_of_module(model: Any) -> ModelConfig:
    """The :class:`ModelConfig` of a ``transformers`` model instance (its class remembered)."""
    cfg = ModelConfig.from_hf(model.config, name=getattr(model.config, "_name_or_path", "")
                              or type(model).__name__)
    arch = ""
    if type(model) is not module_class(cfg):
        arch = f"{type(model).__module__}.{type(model).__qualname__}"
        _CLASSES[arch] = type(model)
    norm = "layer" if any(isinstance(m, torch.nn.LayerNorm) for m in model.modules()) \
        else "rms"
    return dataclasses.replace(cfg, arch=arch, norm=norm)


def _swap_norms(model: torch.nn.Module, cfg: ModelConfig, device: str,
                dtype: torch.dtype) -> None:
    for name, mod in list(model.named_modules()):
        if type(mod).__name__.endswith("RMSNorm"):
            parent, _, attr = name.rpartition(".")
            ln = torch.nn.LayerNorm(mod.weight.shape[0], eps=cfg.rms_eps, device=device,
                                    dtype=dtype)
            setattr(model.get_submodule(parent) if parent else model, attr, ln)


def _is_norm(mod: torch.nn.Module) -> bool:
    return "norm" in type(mod).__name__.lower() and isinstance(
        getattr(mod, "weight", None), torch.nn.Parameter)


def _neutral(mod: torch.nn.Module) -> float:
    """The scale at which norm ``mod`` only normalises: 1 for ``x * w``, 0 for
    ``x * (1 + w)`` (Gemma), found by running it (bias at 0) with the scale at 0."""
    w = mod.weight
    with torch.no_grad():
        if getattr(mod, "bias", None) is not None:
            mod.bias.zero_()
        w.zero_()
        x = torch.randn((2, *w.shape), generator=torch.Generator().manual_seed(0)).to(w.dtype)
        y = mod(x)
    return 1.0 if float(y.float().abs().max()) == 0.0 else 0.0


def init_weights(model: torch.nn.Module, *, seed: int = 0, norms: str = "neutral") -> None:
    """Seeded weights for ``model`` (on the CPU): every parameter N(0, 0.02) from a
    generator seeded with ``seed`` (same seed, same weights), except norm scales at their
    neutral value and norm biases at 0 (``norms="neutral"``), or drawn within 0.5 of
    neutral, biases N(0, 0.1) (``norms="random"``: a norm read from the wrong tensor
    moves the result)."""
    if norms not in ("neutral", "random"):
        raise ModelError(f"norms {norms!r}: use 'neutral' or 'random'")
    gen = torch.Generator().manual_seed(seed)
    mods = [m for m in model.modules() if _is_norm(m)]
    norm_params = {id(p) for m in mods for p in m.parameters(recurse=False)}
    with torch.no_grad():
        for _, p in model.named_parameters():
            if id(p) not in norm_params:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.02)
        for m in mods:
            m.weight.fill_(_neutral(m))
            if norms == "random":
                m.weight.add_(torch.rand(m.weight.shape, generator=gen) - 0.5)
                if getattr(m, "bias", None) is not None:
                    m.bias.copy_(torch.randn(m.bias.shape, generator=gen) * 0.1)


def build_module(cfg: ModelConfig, *, device: str = "meta", seed: int = 0,
                 dtype: torch.dtype | None = None, norms: str = "neutral") -> torch.nn.Module:
    """The module of ``cfg`` in eval mode, in ``dtype`` (default: the config's).

    On ``meta`` nothing is allocated. On ``cpu`` the weights are :func:`init_weights`'
    (``seed``, ``norms``).
    """
    if device not in ("cpu", "meta"):
        raise ModelError(f"device {device!r} is not supported; use 'cpu' or 'meta'")
    _quiet()
    dt = dtype or torch_dtype(cfg)
    hf = to_hf(cfg)
    if getattr(hf, "num_experts", None) or getattr(hf, "num_local_experts", None):
        hf._experts_implementation = "batched_mm"  # every expert in one static graph
    cls = module_class(cfg)
    try:
        with torch.device(device):
            model = cls._from_config(hf, dtype=dt)
    except (TypeError, ValueError, KeyError, RuntimeError, AttributeError,
            AssertionError) as e:  # a pad token outside the vocabulary asserts
        raise ModelError(f"model config {cfg.name!r}: transformers cannot build "
                         f"{cls.__name__}: {str(e).strip().splitlines()[-1:]}") from e
    if cfg.norm == "layer":
        _swap_norms(model, cfg, device, dt)
    if device == "cpu":
        init_weights(model, seed=seed, norms=norms)
    return model.eval()
