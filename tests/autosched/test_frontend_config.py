"""ModelConfig parsing from Hugging Face config.json (through transformers), its errors
(one line naming the field: types, ranges, oversized files), and the built-in zoo."""

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
    c = ModelConfig.from_hf(hf(head_dim=128))
    assert c.head_dim == 128 and c.q_dim == 1024 and c.kv_dim == 256
    with pytest.raises(ModelError, match="transformers rejects it: .*hidden size"):
        ModelConfig.from_hf(hf(hidden_size=500, head_dim=128))  # transformers refuses it


def test_mistral_parsing() -> None:
    c = ModelConfig.from_hf({**hf(model_type="mistral", max_position_embeddings=32768,
                                  rope_theta=1e6), "sliding_window": None})
    assert c.model_type == "mistral" and c.rope_theta == 1e6 and not c.attention_bias
    assert c.sliding_window == 0
    assert ModelConfig.from_hf(hf(model_type="mistral")).sliding_window == 4096  # its default
    w = ModelConfig.from_hf(hf(model_type="mistral", sliding_window=256))
    assert w.sliding_window == 256 and [w.window(i) for i in range(2)] == [256, 256]


def test_qwen2_always_has_attention_bias_and_ignores_unused_window() -> None:
    c = ModelConfig.from_hf(hf(model_type="qwen2", use_sliding_window=False, sliding_window=64,
                               tie_word_embeddings=True))
    assert c.attention_bias and c.tie_embeddings and c.sliding_window == 0
    w = ModelConfig.from_hf(hf(model_type="qwen2", use_sliding_window=True, sliding_window=64,
                               max_window_layers=1))
    assert (w.sliding_window, w.full_layers, w.window(0), w.window(1)) == (64, (0,), 0, 64)


def test_llama_attention_bias_flag() -> None:
    assert ModelConfig.from_hf(hf(attention_bias=True)).attention_bias
    assert ModelConfig.from_hf(hf(mlp_bias=True)).mlp_bias


@pytest.mark.parametrize("spelling", ["rope_scaling", "rope_parameters"])
def test_rope_scaling_is_read_as_transformers_reads_it(spelling: str) -> None:
    rs = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
          "high_freq_factor": 4.0, "original_max_position_embeddings": 256}
    c = ModelConfig.from_hf(hf(**{spelling: rs}))
    assert c.rope_type == "llama3" and dict(c.rope_scaling)["factor"] == 8.0
    assert ModelConfig.from_dict(c.to_dict()) == c
    legacy = ModelConfig.from_hf(hf(rope_scaling={"type": "linear", "factor": 2.0}))
    assert legacy.rope_type == "linear"


def test_hf_round_trip() -> None:
    from autosched.frontend.hf_config import to_hf

    for c in (ModelConfig.from_hf(hf(rope_scaling={"rope_type": "yarn", "factor": 4.0,
                                                   "original_max_position_embeddings": 256})),
              ModelConfig.from_hf(hf(model_type="qwen2", use_sliding_window=True,
                                     sliding_window=64, max_window_layers=1)),
              ModelConfig.from_hf(hf(model_type="mistral", sliding_window=100))):
        assert ModelConfig.from_hf(to_hf(c), name=c.name) == c


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
    (dict(rope_scaling={"rope_type": "bogus"}), "rope_type"),
    (dict(hidden_act="swishy"), "hidden_act"),
    (dict(torch_dtype="int8"), "torch_dtype"),
    (dict(num_hidden_layers=0), "num_hidden_layers"),
    (dict(vocab_size=-1), "vocab_size"),
    (dict(hidden_size="256"), "hidden_size"),
    (dict(hidden_size=256.0), "hidden_size"),
    (dict(num_hidden_layers=True), "num_hidden_layers"),
    (dict(vocab_size=10**13), "vocab_size"),
    (dict(max_position_embeddings=2**40), "max_position_embeddings"),
    (dict(rms_norm_eps="1e-5"), "rms_norm_eps"),
    (dict(rms_norm_eps=0), "rms_norm_eps"),
    (dict(tie_word_embeddings="yes"), "tie_word_embeddings"),
    (dict(rope_scaling=[1, 2]), "rope_scaling"),
    (dict(hidden_act=3), "hidden_act"),
    (dict(head_dim=7), "head_dim"),
])
def test_config_errors_name_the_field(over: dict, field: str) -> None:
    with pytest.raises(ModelError, match=field) as e:
        ModelConfig.from_hf(hf(**over))
    assert isinstance(e.value, AutoschedError) and "\n" not in str(e.value)


def test_dtype_override_and_bad_files(tmp_path) -> None:
    assert ModelConfig.from_hf(hf(torch_dtype="float32")).dtype == "fp16"  # 16 bits on device
    assert ModelConfig.from_hf(hf(torch_dtype="float32"), dtype="bf16").dtype == "bf16"
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ModelError, match="JSON"):
        ModelConfig.from_hf(bad)
    with pytest.raises(ModelError, match="no model config"):
        ModelConfig.from_hf(tmp_path / "missing.json")
    bad.write_text(json.dumps([hf()]))
    with pytest.raises(ModelError, match="JSON object, got a list"):
        ModelConfig.from_hf(bad)
    bad.write_text(json.dumps({**hf(), "padding": "x" * 2_000_000}))
    with pytest.raises(ModelError, match="at most 1,048,576 bytes"):
        ModelConfig.from_hf(bad)


@pytest.mark.parametrize("content, msg", [
    ('{"model_type": "llama", "hidden_size": "256"}', "hidden_size"),
    ("[1, 2, 3]", "JSON object"),
])
def test_cli_bad_config_is_one_line_exit_2(tmp_path, capsys, content: str, msg: str) -> None:
    from autosched.cli import main

    p = tmp_path / "config.json"
    p.write_text(content)
    assert main(["simulate", "--model", str(p)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and msg in err


def test_direct_construction_is_validated() -> None:
    with pytest.raises(ModelError, match="dtype"):
        ModelConfig("llama", 64, 128, 1, 4, 4, 16, 100, dtype="fp32")
    with pytest.raises(ModelError, match="even"):
        ModelConfig("llama", 60, 128, 1, 4, 4, 15, 100)
    with pytest.raises(ModelError, match="attention_bias"):
        ModelConfig("qwen2", 64, 128, 1, 4, 4, 16, 100)


def test_builtins() -> None:
    assert list_models() == ["llama-tiny", "llama2-7b", "llama3-8b", "llama2-13b",
                             "llama2-70b", "llama3-70b"]
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
    big = [get_model_config(n) for n in ("llama2-13b", "llama2-70b", "llama3-70b")]
    assert [(c.hidden, c.intermediate, c.layers, c.heads, c.kv_heads, c.vocab)
            for c in big] == [(5120, 13824, 40, 40, 40, 32000), (8192, 28672, 80, 64, 8, 32000),
                              (8192, 28672, 80, 64, 8, 128256)]
    assert [c.dtype for c in big] == ["fp16", "fp16", "bf16"] and big[2].rope_theta == 5e5


def test_unknown_model_lists_builtins() -> None:
    with pytest.raises(ModelError, match="llama-tiny, llama2-7b, llama3-8b, llama2-13b"):
        get_model_config("gpt-5")
