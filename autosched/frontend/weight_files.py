"""The weight files of a checkpoint folder: safetensors only, and every tensor checked.

:func:`weight_files` finds them: the shards named by ``model.safetensors.index.json``
(read by :mod:`sim.files`; each shard name must stay inside the folder and end in
``.safetensors``) or ``model.safetensors``. A folder without them is refused in one line
naming what it holds; pickle files (``pytorch_model.bin``, ``*.pt``) are never opened.

:func:`check_weights` reads every tensor's header against the model the config describes
(name, shape, a float type) and then its values (finite), one tensor at a time from the
memory-mapped file, before ``transformers`` loads anything.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from sim.files import confined, load_json, shown

from .config import ModelConfig, ModelError

__all__ = ["INDEX", "SINGLE", "WeightFiles", "check_weights", "weight_files"]

INDEX = "model.safetensors.index.json"
SINGLE = "model.safetensors"
MAX_INDEX_BYTES = 64 << 20  # a 400B-parameter model's index is about 1 MB
FLOAT_TYPES = {"F16": "float16", "BF16": "bfloat16", "F32": "float32"}
_MAX_LISTED = 6


@dataclass(frozen=True)
class WeightFiles:
    """A checkpoint's safetensors files (relative names) and, from an index, which file
    holds each tensor (None: the single file holds them all)."""

    folder: Path
    files: tuple[str, ...]
    where: dict[str, str] | None


def _found(folder: Path) -> str:
    names = sorted(p.name for p in folder.iterdir())
    if not names:
        return "nothing"
    more = f" and {len(names) - _MAX_LISTED} more" if len(names) > _MAX_LISTED else ""
    return ", ".join(shown(n, 40)[1:-1] for n in names[:_MAX_LISTED]) + more


def weight_files(folder: str | Path) -> WeightFiles:
    """The safetensors files of ``folder`` (see the module docstring)."""
    folder = Path(folder)
    if (folder / INDEX).exists():
        index = load_json(folder / INDEX, limit=MAX_INDEX_BYTES, what="safetensors index",
                          error=ModelError)
        wmap = index.get("weight_map") if isinstance(index, dict) else None
        if not isinstance(wmap, dict) or not wmap \
                or not all(isinstance(k, str) and isinstance(v, str) for k, v in wmap.items()):
            raise ModelError(f"{folder / INDEX} is not a safetensors index: its weight_map "
                             "must map tensor names to file names")
        for name in sorted(set(wmap.values())):
            confined(folder, name, what="shard", error=ModelError)
            if not name.endswith(".safetensors"):
                raise ModelError(f"{folder / INDEX} names the shard {shown(name)}: autosched "
                                 "reads .safetensors files only (pickle files are never opened)")
            if not (folder / name).is_file():
                raise ModelError(f"{folder / INDEX} names the shard {shown(name)}, which is not "
                                 f"a file in {folder}")
        return WeightFiles(folder, tuple(sorted(set(wmap.values()))), dict(wmap))
    if (folder / SINGLE).is_file():
        return WeightFiles(folder, (SINGLE,), None)
    raise ModelError(f"{folder} has no usable weights (found: {_found(folder)}); autosched "
                     f"reads {SINGLE} or {INDEX} with its shards, never pickle files: save "
                     "the model with save_pretrained(..., safe_serialization=True), or pass "
                     f"{folder / 'config.json'} to run on random weights")


def _expected(cfg: ModelConfig) -> tuple[dict[str, tuple[int, ...]], dict[str, str], list,
                                          dict[str, str]]:
    """(tensor name -> shape, tied name -> name, patterns of names to ignore, stored name ->
    module name where ``transformers`` renames a tensor between file and module) of the
    module ``cfg`` describes, built on the meta device (nothing allocated)."""
    from .checkpoint import tie_map
    from .module import build_module
    from .renames import stored_names

    module = build_module(cfg, device="meta")
    shapes = {k: tuple(v.shape) for k, v in module.state_dict().items()}
    ignore = [re.compile(p) for p in
              getattr(type(module), "_keys_to_ignore_on_load_unexpected", None) or ()]
    renamed = {alt: name for name in shapes for alt in stored_names(module, name)}
    return shapes, tie_map(module), ignore, renamed


_EXPERT = re.compile(r"^(.*\.experts)\.\d+\.(w1|w2|w3|gate_proj|up_proj|down_proj)\.weight$")


def _stacked_expert(name: str, shapes: dict[str, tuple[int, ...]]) -> str | None:
    """The module's stacked parameter holding a checkpoint's per-expert matrix ``name``
    (``...experts.3.w1.weight`` -> ``...experts.gate_up_proj``), else None: mixture-of-
    experts checkpoints store one matrix per expert, ``transformers`` stacks them."""
    hit = _EXPERT.match(name)
    if hit is None:
        return None
    part = "down_proj" if hit.group(2) in ("w2", "down_proj") else "gate_up_proj"
    for prefix in (hit.group(1), hit.group(1).replace("block_sparse_moe", "mlp")):
        if f"{prefix}.{part}" in shapes:
            return f"{prefix}.{part}"
    return None


def check_weights(files: WeightFiles, cfg: ModelConfig) -> None:
    """Raise :class:`ModelError` naming the first tensor that is unknown to the model, of
    another shape, not a float type or not finite, or an expected tensor that is missing."""
    import torch
    from safetensors import SafetensorError, safe_open

    shapes, ties, ignore, renamed = _expected(cfg)
    seen: set[str] = set()
    for fname in files.files:
        path = files.folder / fname
        try:
            handle = safe_open(str(path), framework="pt", device="cpu")
        except (OSError, RuntimeError, ValueError, SafetensorError) as e:
            raise ModelError(f"cannot read {path} as safetensors: "
                             f"{shown(str(e), 120)[1:-1]}") from None
        for name in handle.keys():  # noqa: SIM118 (a safetensors handle, not a dict)
            if files.where is not None and files.where.get(name) != fname:
                continue  # the index says another shard holds it
            stored, name = name, renamed.get(name, name)
            view = handle.get_slice(stored)
            if cfg.quant:  # a compressed-tensors part of a quantized linear
                base = _quantized_part(path, name, view, shapes, cfg)
                if base is not None:
                    seen.add(base)
                    continue
            stacked = _stacked_expert(name, shapes)
            if stacked is not None:  # one expert's matrix of a stacked parameter
                name = stacked
            elif name.replace("block_sparse_moe", "mlp") in shapes:  # Mixtral's files
                name = name.replace("block_sparse_moe", "mlp")
            elif name not in shapes:
                if any(p.search(name) for p in ignore):
                    continue
                raise ModelError(f"{path}: tensor {shown(name)} is not a weight of "
                                 f"{cfg.name or cfg.model_type}")
            shape, dtype = tuple(view.get_shape()), view.get_dtype()
            if stacked is None and shape != shapes[name]:
                raise ModelError(f"{path}: tensor {name} has shape {list(shape)}, the config "
                                 f"says {list(shapes[name])}")
            if dtype not in FLOAT_TYPES:
                raise ModelError(f"{path}: tensor {name} is {dtype}; weights must be one of "
                                 f"{', '.join(FLOAT_TYPES.values())}")
            if not bool(torch.isfinite(handle.get_tensor(stored)).all()):
                raise ModelError(f"{path}: tensor {name} holds NaN or infinite values")
            seen.add(name)
    missing = [n for n in shapes if n not in seen and ties.get(n) not in seen]
    if missing:
        raise ModelError(f"{files.folder}: the checkpoint has no tensor {missing[0]}"
                         + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""))


_PART_TYPES = {"weight_packed": ("I32",), "weight_scale": tuple(FLOAT_TYPES),
               "weight_zero_point": ("I32", "I8"), "weight_shape": ("I64", "I32"),
               "weight": ("I8",)}


def _quantized_part(path: Path, name: str, view: object, shapes: dict, cfg: ModelConfig
                    ) -> str | None:
    """The float weight a ``compressed-tensors`` tensor ``name`` stands for (checked: its
    type and its shape against the weight's), or None when it is no such part."""
    from sim.formats import weight_format

    from .quantized import is_ignored

    module, _, part = name.rpartition(".")
    base = module + ".weight"
    if part not in _PART_TYPES or base not in shapes or len(shapes[base]) != 2 or \
            is_ignored(module, cfg.quant_ignore):
        return None
    dtype, shape = view.get_dtype(), tuple(view.get_shape())
    if part == "weight" and dtype in FLOAT_TYPES:
        return None  # a float weight the scheme left alone
    if dtype not in _PART_TYPES[part]:
        raise ModelError(f"{path}: tensor {name} is {dtype}; a {part} must be "
                         f"{' or '.join(_PART_TYPES[part])}")
    n, k = shapes[base]
    fmt = weight_format(cfg.quant)
    want = {"weight_packed": (n, -(-k * fmt.bits // 32)), "weight_scale": (n, fmt.groups(k)),
            "weight_shape": (2,), "weight": (n, k),
            "weight_zero_point": ((-(-n * fmt.bits // 32), fmt.groups(k)) if dtype == "I32"
                                  else (n, fmt.groups(k)))}[part]
    if part == "weight_scale" and shape == (n,):
        want = (n,)
    if shape != want:
        raise ModelError(f"{path}: tensor {name} has shape {list(shape)}; {cfg.quant} "
                         f"weights of [{n}, {k}] need {list(want)}")
    return base
