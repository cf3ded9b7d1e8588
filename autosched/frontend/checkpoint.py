"""Named tensors of a model: from a torch module, or from a checkpoint folder's
safetensors files, memory-mapped and read one tensor at a time (never pickle).

A checkpoint folder is what ``save_pretrained`` writes: ``config.json`` and either
``model.safetensors`` or shards listed in ``model.safetensors.index.json``
(:mod:`.weight_files` finds them, confined to the folder, and checks every tensor). Tied
weights (an LM head sharing the embedding table) are stored once; either name finds them.
"""

from __future__ import annotations

import abc
import functools
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .config import ModelError

__all__ = ["CheckpointWeights", "ModuleWeights", "Weights", "is_checkpoint", "load_reference",
           "tie_map"]

_INDEX = "model.safetensors.index.json"
_SINGLE = "model.safetensors"


def is_checkpoint(path: object) -> bool:
    """Whether ``path`` is a folder holding a config and safetensors weights."""
    p = Path(str(path))
    return p.is_dir() and (p / "config.json").is_file() and (
        (p / _INDEX).is_file() or (p / _SINGLE).is_file())


class Weights(abc.ABC):
    """A model's tensors by parameter name, as float32 arrays, and its submodules.

    Read-only; ``get`` returns a fresh array each call. ``dtype`` (``fp16``/``bf16``, or
    None) rounds every tensor read to that device type.
    """

    def __init__(self, dtype: str | None = None, ties: dict[str, str] | None = None) -> None:
        self.dtype = dtype
        self.ties = {**(ties or {}), **{v: k for k, v in (ties or {}).items()}}

    @abc.abstractmethod
    def tensor(self, name: str) -> torch.Tensor | None:
        """The tensor called ``name``, or None when there is none."""

    @abc.abstractmethod
    def module(self, path: str) -> torch.nn.Module:
        """The submodule at ``path`` (e.g. the rotary embedding)."""

    def get(self, name: str) -> np.ndarray:
        """Tensor ``name`` as float32 (its tie, or the name its checkpoint stores it under
        when ``transformers`` renames it, found too); a derived name
        (:mod:`autosched.ir.derived`) is the stored tensor, rounded, then transformed."""
        from autosched.ir.derived import BUFFER, parse

        if "|" in name:  # tensors joined by row (a norm list's scales, heads in order)
            return np.concatenate([self.get(part) for part in name.split("|")], axis=0)
        d = parse(name)
        if d.name != name:
            scale = d.scale
            if isinstance(scale, str):
                path, _, attr = scale[len(BUFFER):].rpartition(".")
                scale = float(self.module(path).get_buffer(attr).float().reshape(-1)[0])
            return d.apply(self.get(d.name), scale)
        t = self.tensor(name)
        if t is None and name in self.ties:
            t = self.tensor(self.ties[name])
        if t is None:
            from .renames import stored_names

            t = next((x for alt in stored_names(self.module(""), name)
                      if (x := self.tensor(alt)) is not None), None)
        if t is None:
            raise ModelError(f"the model has no tensor {name!r}")
        x = t.detach().to(torch.float32).cpu().numpy()
        if self.dtype is not None:
            from sim.functional import round_to

            x = round_to(x, self.dtype)
        return np.ascontiguousarray(x, dtype=np.float32)


def _ties(model: Any) -> dict[str, str]:
    if not getattr(getattr(model, "config", None), "tie_word_embeddings", False):
        return {}
    keys = getattr(type(model), "_tied_weights_keys", None)
    return dict(keys) if isinstance(keys, dict) else {}


def tie_map(model: Any) -> dict[str, str]:
    """Each tied tensor name of ``model`` -> the name it shares storage with (both ways)."""
    t = _ties(model)
    return {**t, **{v: k for k, v in t.items()}}


class ModuleWeights(Weights):
    """The parameters and buffers of a torch module."""

    def __init__(self, model: torch.nn.Module, dtype: str | None = None) -> None:
        super().__init__(dtype, _ties(model))
        self.model = model
        self._named = {**dict(model.named_parameters(remove_duplicate=False)),
                       **dict(model.named_buffers(remove_duplicate=False))}

    def tensor(self, name: str) -> torch.Tensor | None:
        return self._named.get(name)

    def module(self, path: str) -> torch.nn.Module:
        return self.model.get_submodule(path)


class CheckpointWeights(Weights):
    """The tensors of a checkpoint folder, each read from its memory-mapped file on demand;
    submodules from ``modules`` (the model the checkpoint was loaded into)."""

    def __init__(self, folder: str | Path, modules: torch.nn.Module,
                 dtype: str | None = None, quant: str = "") -> None:
        from safetensors import SafetensorError, safe_open

        from .weight_files import weight_files

        super().__init__(dtype, _ties(modules))
        self.folder, self.modules, self.quant = Path(folder), modules, quant
        found = weight_files(self.folder)  # names confined to the folder, safetensors only
        wmap = found.where
        self._files: dict[str, Any] = {}
        for f in found.files:
            try:
                self._files[f] = safe_open(str(self.folder / f), framework="pt", device="cpu")
            except (OSError, RuntimeError, ValueError, SafetensorError) as e:
                raise ModelError(f"cannot read {self.folder / f} as safetensors: {e}") from e
        self._where = dict(wmap) if wmap else {k: _SINGLE for k in self._files[_SINGLE].keys()}

    def tensor(self, name: str) -> torch.Tensor | None:
        f = self._where.get(name)
        if self.quant and name.endswith(".weight") and \
                name[:-len(".weight")] + ".weight_scale" in self._where:  # stored as codes
            from sim.formats import weight_format

            from .quantized import dequantized

            w = dequantized(self._stored, name[:-len(".weight")], weight_format(self.quant))
            return None if w is None else torch.from_numpy(w)
        config = self.modules.config
        if (f is None and ".mlp." in name and getattr(config, "num_experts", None)) \
                or getattr(config, "num_local_experts", None):
            # experts stacked and routers renamed from the files' matrices by transformers
            return self._parameters.get(name)
        return None if f is None else self._files[f].get_tensor(name)

    @functools.cached_property
    def _parameters(self) -> dict[str, torch.Tensor]:
        """The loaded model's parameters by name, gathered once (expert models read many)."""
        return dict(self.modules.named_parameters())

    def _stored(self, name: str) -> tuple[np.ndarray, str] | None:
        """A stored tensor as numpy and its safetensors dtype name, or None."""
        f = self._where.get(name)
        if f is None:
            return None
        t = self._files[f].get_tensor(name)
        return t.float().numpy() if t.is_floating_point() else t.numpy(), \
            self._files[f].get_slice(name).get_dtype()

    def module(self, path: str) -> torch.nn.Module:
        return self.modules.get_submodule(path)


def load_reference(folder: str | Path, dtype: torch.dtype = torch.float32,
                   quantized: bool = False) -> torch.nn.Module:
    """The ``transformers`` model of a checkpoint folder (safetensors only), eval mode;
    ``quantized``: a ``compressed-tensors`` checkpoint, loaded with its weights
    dequantized by ``compressed-tensors`` itself (plain ``Linear`` modules)."""
    from safetensors import SafetensorError
    from transformers import AutoModelForCausalLM

    from .module import _quiet

    _quiet()
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # stderr holds one line per error, nothing else
    try:
        extra = {}
        if quantized:
            import warnings

            from transformers.utils.quantization_config import CompressedTensorsConfig

            warnings.filterwarnings("ignore", message=".*quantization_config.*")
            extra["quantization_config"] = CompressedTensorsConfig(dequantize=True)
        return AutoModelForCausalLM.from_pretrained(str(folder), dtype=dtype,
                                                    use_safetensors=True, **extra).eval()
    except (OSError, ValueError, RuntimeError, KeyError, SafetensorError) as e:
        raise ModelError(f"transformers cannot load the checkpoint {folder}: "
                         f"{str(e).strip().splitlines()[0][:200]}") from e
