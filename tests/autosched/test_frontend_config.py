"""ModelConfig parsing from Hugging Face config.json, its errors, and the built-in zoo."""

from __future__ import annotations

import json

import pytest

from autosched.frontend import ModelConfig, ModelError, get_model_config, list_models
from sim.errors import AutoschedError

LLAMA = {
    "model_type": "llama", "hidden_size": 512, "intermediate_size": 1376,
    "num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 2,
    "vocab_size": 1000, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
    "max_position_embeddings": 1024, "tie_word_embeddings": False, "hidden_act": "silu",
    "torch_dtype": "float16",
}


def hf(**over: object) -> dict:
    d = dict(LLAMA)
    for k, v in over.items():
        if v is None:
            d.pop(k, None)
        else:
            d[k] = v
    return d


def test_llama_fields() -> None:
    c = ModelConfig.from_hf(hf(), name="toy")
    assert (c.model_type, c.hidden, c.intermediate, c.layers) == ("llama", 512, 1376, 2)
    assert (c.heads, c.kv_heads, c.head_dim, c.vocab) == (8, 2, 64, 1000)
    assert (c.rms_eps, c.rope_theta, c.max_positions) == (1e-6, 10000.0, 1024)
    assert (c.tie_embeddings, c.attention_bias, c.dtype, c.name) == (False, False, "fp16", "toy")
    assert ModelConfig.from_dict(c.to_dict()) == c


def test_defaults_kv_heads_and_head_dim() -> None:
    c = ModelConfig.from_hf(hf(num_key_value_heads=None, torch_dtype="bfloat16"))
    assert c.kv_heads == 8 and c.head_dim == 64 and c.dtype == "bf16"


def test_explicit_head_dim_may_differ_from_hidden_over_heads() -> None:
    c = ModelConfig.from_hf(hf(hidden_size=500, head_dim=128))
    assert c.head_dim == 128 and c.q_dim == 1024 and c.kv_dim == 256


def test_mistral_parsing() -> None:
    c = ModelConfig.from_hf(hf(model_type="mistral", sliding_window=None,
                               max_position_embeddings=32768, rope_theta=1e6))
    assert c.model_type == "mistral" and c.rope_theta == 1e6 and not c.attention_bias
    # a window covering every position changes nothing, so it is accepted
    assert ModelConfig.from_hf(hf(model_type="mistral", sliding_window=1024)).max_positions == 1024


def test_qwen2_always_has_attention_bias_and_ignores_unused_window() -> None:
    c = ModelConfig.from_hf(hf(model_type="qwen2", use_sliding_window=False, sliding_window=64,
                               tie_word_embeddings=True))
    assert c.attention_bias and c.tie_embeddings


def test_llama_attention_bias_flag() -> None:
    assert ModelConfig.from_hf(hf(attention_bias=True)).attention_bias


def test_from_file_and_directory(tmp_path) -> None:
    d = tmp_path / "my-model"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(hf()))
    assert ModelConfig.from_hf(d).name == "my-model"
    assert ModelConfig.from_hf(d / "config.json") == ModelConfig.from_hf(d)
    assert get_model_config(str(d)).hidden == 512


@pytest.mark.parametrize("over, field", [
    (dict(model_type="gpt2"), "model_type"),
    (dict(hidden_size=None), "hidden_size"),
    (dict(intermediate_size=None), "intermediate_size"),
    (dict(num_hidden_layers=None), "num_hidden_layers"),
    (dict(num_attention_heads=None), "num_attention_heads"),
    (dict(vocab_size=None), "vocab_size"),
    (dict(num_key_value_heads=3), "kv_heads"),
    (dict(hidden_size=500), "head_dim"),
    (dict(rope_scaling={"rope_type": "llama3", "factor": 8.0}), "rope_scaling"),
    (dict(model_type="mistral", sliding_window=256), "sliding_window"),
    (dict(model_type="qwen2", use_sliding_window=True, sliding_window=256), "sliding_window"),
    (dict(hidden_act="gelu"), "hidden_act"),
    (dict(mlp_bias=True), "mlp_bias"),
    (dict(torch_dtype="float32"), "torch_dtype"),
    (dict(num_hidden_layers=0), "layers"),
    (dict(vocab_size=-1), "vocab"),
])
def test_config_errors_name_the_field(over: dict, field: str) -> None:
    with pytest.raises(ModelError, match=field) as e:
        ModelConfig.from_hf(hf(**over))
    assert isinstance(e.value, AutoschedError)


def test_dtype_override_and_bad_files(tmp_path) -> None:
    assert ModelConfig.from_hf(hf(torch_dtype="float32"), dtype="fp16").dtype == "fp16"
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ModelError, match="JSON"):
        ModelConfig.from_hf(bad)
    with pytest.raises(ModelError, match="no model config"):
        ModelConfig.from_hf(tmp_path / "missing.json")


def test_direct_construction_is_validated() -> None:
    with pytest.raises(ModelError, match="dtype"):
        ModelConfig("llama", 64, 128, 1, 4, 4, 16, 100, dtype="fp32")
    with pytest.raises(ModelError, match="even"):
        ModelConfig("llama", 60, 128, 1, 4, 4, 15, 100)


def test_builtins() -> None:
    assert list_models() == ["llama-tiny", "llama2-7b", "llama3-8b", "llama2-13b", "llama2-70b",
                             "llama3-70b"]
    t = get_model_config("llama-tiny")
    assert (t.hidden, t.intermediate, t.layers, t.heads, t.kv_heads, t.head_dim) == (
        256, 688, 4, 8, 4, 32)
    assert (t.vocab, t.rms_eps, t.rope_theta, t.max_positions, t.dtype) == (
        4096, 1e-5, 10000.0, 512, "fp16")
    l2 = get_model_config("llama2-7b")
    assert (l2.hidden, l2.intermediate, l2.layers, l2.heads, l2.kv_heads, l2.vocab) == (
        4096, 11008, 32, 32, 32, 32000)
    l3 = get_model_config("llama3-8b")
    assert (l3.hidden, l3.intermediate, l3.layers, l3.heads, l3.kv_heads, l3.vocab) == (
        4096, 14336, 32, 32, 8, 128256)
    assert l3.rope_theta == 500000.0 and l3.head_dim == 128
    assert get_model_config(l3) is l3


def test_unknown_model_lists_builtins() -> None:
    with pytest.raises(ModelError, match="llama-tiny, llama2-7b, llama3-8b"):
        get_model_config("gpt-5")
