"""The transformers module of a config, a user's own module, and checkpoint folders
(safetensors, memory-mapped, sharded or not)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
import transformers

from autosched.frontend import (
    ModelConfig,
    ModelError,
    build_module,
    capture,
    config_of_module,
    get_model_config,
)
from autosched.frontend.checkpoint import CheckpointWeights, ModuleWeights, is_checkpoint
from autosched.frontend.source import load_source

TINY = ModelConfig("llama", hidden=64, intermediate=96, layers=2, heads=4, kv_heads=2,
                   head_dim=16, vocab=97, max_positions=32, name="tiny-test")
QWEN = ModelConfig("qwen2", hidden=64, intermediate=96, layers=1, heads=4, kv_heads=2,
                   head_dim=16, vocab=97, max_positions=32, tie_embeddings=True,
                   attention_bias=True, name="qwen-test")


def test_seeded_weights_are_reproducible_and_norms_are_one() -> None:
    a, b, c = (build_module(TINY, device="cpu", seed=s) for s in (7, 7, 8))
    for (name, pa), pb, pc in zip(a.named_parameters(), b.parameters(), c.parameters(),
                                  strict=True):
        assert torch.equal(pa, pb)
        if name.endswith("norm.weight"):
            assert torch.all(pa == 1)
        else:
            assert not torch.equal(pa, pc)
    assert isinstance(a, transformers.LlamaForCausalLM) and a.dtype == torch.float16


def test_meta_allocates_nothing_and_unknown_devices_fail() -> None:
    m = build_module(get_model_config("llama3-8b"), device="meta")
    assert all(p.device.type == "meta" for p in m.parameters())
    with pytest.raises(ModelError, match="device"):
        build_module(TINY, device="cuda")


def test_qwen2_tied_head_and_biases() -> None:
    m = build_module(QWEN, device="cpu")
    assert m.lm_head.weight is m.model.embed_tokens.weight
    assert m.model.layers[0].self_attn.q_proj.bias is not None
    assert m.model.layers[0].self_attn.o_proj.bias is None
    untied = build_module(dataclasses.replace(QWEN, tie_embeddings=False), device="cpu")
    assert untied.lm_head.weight is not untied.model.embed_tokens.weight


def test_layernorm_variant_swaps_every_norm() -> None:
    m = build_module(dataclasses.replace(TINY, norm="layer"), device="cpu")
    norms = [x for x in m.modules() if isinstance(x, torch.nn.LayerNorm)]
    assert len(norms) == 2 * TINY.layers + 1 and norms[0].bias is not None
    assert config_of_module(m).norm == "layer"


class ScaledEmbeddingLlama(transformers.LlamaForCausalLM):
    """A user's own class: its embeddings scaled by 2 before the decoder."""

    def forward(self, input_ids=None, **kw):
        return super().forward(inputs_embeds=self.model.embed_tokens(input_ids) * 2.0, **kw)


def test_a_users_own_class_is_captured_not_the_familys() -> None:
    model = ScaledEmbeddingLlama(transformers.LlamaConfig(
        hidden_size=64, intermediate_size=96, num_hidden_layers=1, num_attention_heads=4,
        num_key_value_heads=2, vocab_size=97, max_position_embeddings=32))
    cfg = config_of_module(model)
    assert cfg.arch.endswith("ScaledEmbeddingLlama")
    g = capture(model, context=8)
    assert not [n for n in g if n.workload.op == "extern"]  # the * 2.0 is in the table
    assert g.node("embed").param("table") == "model.embed_tokens.weight@s=2.0"
    assert g.node("l0.attn_norm").inputs == ("embed",)


@pytest.mark.parametrize("shard", [None, "20KB"])
def test_checkpoint_weights_are_the_saved_ones(tmp_path, shard) -> None:
    model = build_module(QWEN, device="cpu", seed=3)
    kw = {"max_shard_size": shard} if shard else {}
    model.save_pretrained(tmp_path, **kw)
    assert is_checkpoint(tmp_path) and not is_checkpoint(tmp_path / "config.json")
    assert (tmp_path / "model.safetensors.index.json").is_file() == bool(shard)
    src = load_source(tmp_path)
    assert src.cfg.tie_embeddings and src.cfg.name == tmp_path.name
    assert isinstance(src.weights, CheckpointWeights)
    mine = ModuleWeights(model)
    for name in ("model.layers.0.self_attn.q_proj.weight", "model.layers.0.self_attn.q_proj.bias",
                 "lm_head.weight", "model.embed_tokens.weight"):
        np.testing.assert_array_equal(src.weights.get(name), mine.get(name))
    with pytest.raises(ModelError, match="no tensor"):
        src.weights.get("model.layers.9.mlp.up_proj.weight")


def test_rounding_to_the_device_type(tmp_path) -> None:
    build_module(TINY, device="cpu", seed=1, dtype=torch.float32).save_pretrained(tmp_path)
    src = load_source(tmp_path, dtype="bf16")
    w = src.weights.get("model.layers.1.mlp.down_proj.weight")
    assert np.array_equal(w, w.astype(np.float32).view(np.uint32).__and__(0xFFFF0000)
                          .view(np.float32))
    ref = src.reference.model.layers[1].mlp.down_proj.weight.detach().numpy()
    np.testing.assert_array_equal(ref, w)  # the reference holds what the device holds


def test_broken_checkpoint_is_one_line(tmp_path) -> None:
    build_module(TINY, device="cpu").save_pretrained(tmp_path)
    (tmp_path / "model.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(ModelError) as e:
        load_source(tmp_path)
    assert "\n" not in str(e.value)
