"""Quantized weights in: ``compressed-tensors`` checkpoints (as ``llmcompressor`` writes
them) and round-to-nearest quantization of a float model on the fly (``--quantize``).

A checkpoint's ``quantization_config`` (``quant_method: compressed-tensors``) is read into
the model config's ``quant`` (the weight format, :mod:`sim.formats`: ``w8``,
``w4g128``, ``w4g64a``...) and ``quant_ignore`` (modules left in float, e.g.
``lm_head``). Weight-only integer schemes are taken (W8A16, W4A16; ``channel`` or
``group`` strategy, symmetric or not) in the ``pack-quantized`` (codes packed in int32)
or ``int-quantized`` (int8 codes) formats; anything else (activation quantization,
floating-point formats, several schemes) is refused in one line. Every linear weight a
quantized module holds becomes its dequantized values ``(q - z) * s`` in the scale's
type, as ``compressed-tensors`` computes them; the workloads of those linears carry the
format as their ``dtype`` (:func:`mark_quantized`), so the banks hold codes wherever the
units take the format and the reports say which format each weight is in.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import numpy as np

from sim.formats import (
    Quantized,
    WeightFormat,
    dequantize,
    quantize_rtn,
    unpack_int32,
    weight_format,
)

from .config import ModelConfig, ModelError

__all__ = ["PARTS", "dequantized", "is_ignored", "mark_quantized", "quant_fields",
           "quantize_module", "weights_line", "with_quantization"]

_FORMATS = ("pack-quantized", "int-quantized")
PARTS = ("weight_packed", "weight_scale", "weight_zero_point", "weight_shape", "weight")
_SCALE_TYPES = {"F16": "fp16", "BF16": "bf16", "F32": "fp32"}


def quant_fields(hf: dict[str, Any], label: str) -> dict[str, Any]:
    """``quant`` and ``quant_ignore`` of a config.json's ``quantization_config`` ({} when
    it has none); refuses what the device cannot take."""
    qc = hf.get("quantization_config")
    if qc is None:
        return {}

    def no(why: str) -> ModelError:
        return ModelError(f"model config {label!r}: quantization_config {why}")

    if not isinstance(qc, dict) or qc.get("quant_method") != "compressed-tensors":
        raise no("must be a compressed-tensors one (quant_method: compressed-tensors)")
    fmt = qc.get("format")
    if fmt not in _FORMATS:
        raise no(f"format {fmt!r} is not supported; use {' or '.join(_FORMATS)}")
    groups = qc.get("config_groups") or {}
    if not isinstance(groups, dict) or len(groups) != 1:
        raise no("must hold exactly one config group (one weight format for every linear)")
    (scheme,) = groups.values()
    w = scheme.get("weights") or {}
    if scheme.get("input_activations") or scheme.get("output_activations"):
        raise no("quantizes activations; only weight-only schemes (W8A16, W4A16) run")
    bits, strategy, gs = w.get("num_bits"), w.get("strategy"), w.get("group_size")
    if w.get("type") != "int" or bits not in (4, 8) or w.get("dynamic"):
        raise no(f"weights must be static int4 or int8, got {w.get('type')} {bits}-bit")
    if strategy not in ("channel", "group") or (strategy == "group" and not gs):
        raise no(f"weight strategy {strategy!r} is not supported; use channel or group")
    name = f"w{bits}" + (f"g{gs}" if strategy == "group" else "") + \
        ("" if w.get("symmetric", True) else "a")
    try:
        weight_format(name)
    except Exception as e:  # noqa: BLE001 (one line naming the format)
        raise no(str(e)) from None
    if scheme.get("targets") != ["Linear"]:
        raise no(f"targets {scheme.get('targets')} are not supported; use ['Linear']")
    ignore = qc.get("ignore") or []
    if not all(isinstance(i, str) for i in ignore):
        raise no("ignore must be a list of module names")
    return {"quant": name, "quant_ignore": tuple(ignore)}


def is_ignored(module: str, ignore: tuple[str, ...]) -> bool:
    """Whether ``module`` is left in float by an ``ignore`` list (names or ``re:`` patterns)."""
    for pat in ignore:
        if pat.startswith("re:"):
            if re.match(pat[3:], module):
                return True
        elif module == pat or module.endswith("." + pat):
            return True
    return False


def with_quantization(cfg: ModelConfig, fmt: str) -> ModelConfig:
    """``cfg`` with every linear but the LM head quantized to ``fmt`` (``--quantize``)."""
    f = weight_format(fmt)
    if not f.quantized:
        raise ModelError(f"--quantize {fmt!r}: give an integer format such as w8 or w4g128")
    if cfg.quant and cfg.quant != f.name:
        raise ModelError(f"model config {cfg.name!r} is quantized to {cfg.quant} already")
    return dataclasses.replace(cfg, quant=f.name, quant_ignore=cfg.quant_ignore or ("lm_head",))


def mark_quantized(nodes: list, cfg: ModelConfig) -> list:
    """``nodes`` with the workload of every linear of a quantized module in the format."""
    if not cfg.quant:
        return nodes
    from autosched.families import family_of

    out = []
    for n in nodes:
        wname = n.param("W")
        fam = family_of(n.workload)
        if wname and fam.memory_kind == "weights" and wname.endswith(".weight") and \
                not is_ignored(wname[:-len(".weight")], cfg.quant_ignore):
            n = dataclasses.replace(n, workload=dataclasses.replace(n.workload, dtype=cfg.quant))
        out.append(n)
    return out


def dequantized(get: Any, module: str, fmt: WeightFormat) -> np.ndarray | None:
    """The dequantized ``[n, k]`` weight of ``module`` from a checkpoint (``get(name)``:
    the stored array or None), or None when the module is not stored quantized."""
    scale = get(module + ".weight_scale")
    if scale is None:
        return None
    scale_np, stype = scale
    packed = get(module + ".weight_packed")
    if packed is not None:
        n, k = (int(v) for v in get(module + ".weight_shape")[0])
        q = unpack_int32(packed[0], fmt.bits, k, 1)
    else:
        q = get(module + ".weight")[0].astype(np.int8)
        n, k = q.shape
    zp = get(module + ".weight_zero_point")
    zero = np.zeros(scale_np.shape, np.int8)
    if zp is not None and not fmt.symmetric:
        z = zp[0]
        zero = unpack_int32(z, fmt.bits, n, 0) if z.dtype == np.int32 \
            else z.astype(np.int8)
    scale_np = scale_np.reshape(n, -1)
    return dequantize(Quantized(q, scale_np.astype(np.float32), zero.reshape(n, -1), fmt),
                      scale_type(stype))


def quantize_module(model: Any, cfg: ModelConfig) -> None:
    """Round every quantized linear weight of ``model`` (in place) to ``cfg.quant`` by
    round-to-nearest with fp16 scales, dequantized: what ``--quantize`` runs."""
    import torch

    fmt = weight_format(cfg.quant)
    with torch.no_grad():
        for name, mod in model.named_modules():
            if isinstance(mod, torch.nn.Linear) and not is_ignored(name, cfg.quant_ignore):
                w = mod.weight.detach().float().cpu().numpy()
                deq = dequantize(quantize_rtn(w, fmt, "fp16"), "fp16")
                mod.weight.copy_(torch.from_numpy(deq))


def scale_type(dtype: str) -> str:
    """The number type of a stored scale (a safetensors dtype name)."""
    return _SCALE_TYPES.get(dtype, "fp32")


def weights_line(graph: Any, hw: Any) -> str | None:
    """What the step does with its quantized weights on ``hw`` (None when it has none):
    packed codes in the banks, or dequantized at load because the units do not take the
    format; a quantized model is never run as a float one without saying so."""
    from sim.formats import dequant_site

    fmts: dict[str, int] = {}
    for n in graph:
        if n.workload.dtype not in ("fp16", "bf16", "fp32"):
            fmts[n.workload.dtype] = fmts.get(n.workload.dtype, 0) + 1
    if not fmts:
        return None
    parts = []
    for name, count in sorted(fmts.items()):
        fmt = weight_format(name)
        if dequant_site(fmt, hw) == "bank":
            parts.append(f"{name} on {count} linears: packed {fmt.kind} codes and scales in "
                         "the banks, dequantized in the bank (by the host for a linear "
                         "placed there)")
        else:
            parts.append(f"{name} on {count} linears: DEQUANTIZED AT LOAD to {hw.pim.dtype} "
                         f"({hw.name}'s units do not take {fmt.kind}"
                         f"{f' groups of {fmt.group}' if fmt.group else ''}): no bytes saved")
    return "weights: " + "; ".join(parts)
