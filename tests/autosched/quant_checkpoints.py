"""Small ``compressed-tensors`` checkpoints of a tiny random Llama, made by
``compressed-tensors`` itself (its quantization config, min/max scales, and
``ModelCompressor``), as ``llmcompressor`` writes them."""

from __future__ import annotations

from pathlib import Path

import torch
import transformers

SMALL = dict(hidden_size=128, intermediate_size=256, num_hidden_layers=2,
             num_attention_heads=4, num_key_value_heads=2, vocab_size=101,
             max_position_embeddings=64)


def quantized_checkpoint(folder: Path, *, bits: int, group: int | None, symmetric: bool,
                         fmt: str, seed: int = 0) -> Path:
    """Write a tiny Llama whose linears (not the LM head) are ``bits``-bit, one scale per
    ``group`` (None: per output channel), in the ``compressed-tensors`` format ``fmt``."""
    from compressed_tensors.compressors import ModelCompressor
    from compressed_tensors.quantization import (
        QuantizationArgs,
        QuantizationConfig,
        QuantizationScheme,
        apply_quantization_config,
    )
    from compressed_tensors.quantization.utils import calculate_qparams

    torch.manual_seed(seed)
    model = transformers.LlamaForCausalLM(transformers.LlamaConfig(**SMALL)).to(torch.float16)
    args = QuantizationArgs(num_bits=bits, type="int", symmetric=symmetric,
                            strategy="group" if group else "channel", group_size=group)
    qc = QuantizationConfig(config_groups={"group_0": QuantizationScheme(
        targets=["Linear"], weights=args)}, ignore=["lm_head"], format=fmt)
    apply_quantization_config(model, qc)
    for mod in model.modules():
        if hasattr(mod, "weight_scale"):
            w = mod.weight.detach().float()
            wg = w.reshape(w.shape[0], -1, group or w.shape[1])
            scale, zero = calculate_qparams(wg.amin(-1), wg.amax(-1), args)
            mod.weight_scale.data.copy_(scale.reshape(mod.weight_scale.shape))
            mod.weight_zero_point.data.copy_(zero.reshape(mod.weight_zero_point.shape))
    comp = ModelCompressor.from_pretrained_model(model, quantization_format=fmt)
    comp.compress_model(model)
    model.save_pretrained(folder)
    comp.update_config(folder)
    return folder
