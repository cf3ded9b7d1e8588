"""The public checkpoint configs of ``experiments/configs/`` are read unchanged, with the
fields that used to be refused (llama3 RoPE, a sliding window, head dim 100), and the
smallest of them simulates from the command line at or above its bound."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autosched.cli import main
from autosched.frontend import ModelConfig

CONFIGS = Path(__file__).parents[2] / "experiments" / "configs"
EXPECTED = {  # file stem: (model_type, layers, heads, kv_heads, head_dim, window, rope_type)
    "llama-3.2-1b": ("llama", 16, 32, 8, 64, 0, "llama3"),
    "llama-3.1-8b": ("llama", 32, 32, 8, 128, 0, "llama3"),
    "mistral-7b-v0.1": ("mistral", 32, 32, 8, 128, 4096, None),
    "qwen2-0.5b": ("qwen2", 24, 14, 2, 64, 0, None),
    "qwen2-1.5b": ("qwen2", 28, 12, 2, 128, 0, None),
    "qwen2-7b": ("qwen2", 28, 28, 4, 128, 0, None),
    "tinyllama-1.1b": ("llama", 22, 32, 4, 64, 0, None),
    "smollm-135m": ("llama", 30, 9, 3, 64, 0, None),
    "open-llama-3b": ("llama", 26, 32, 32, 100, 0, None),
    "qwen3-0.6b": ("qwen3", 28, 16, 8, 128, 0, None),
    "gemma-2-2b-it": ("gemma2", 26, 8, 4, 256, 4096, None),
    "mixtral-8x7b-v0.1": ("mixtral", 32, 32, 8, 128, 0, None),
    "qwen3-30b-a3b": ("qwen3_moe", 48, 32, 4, 128, 0, None),
    "olmoe-1b-7b-0125-instruct": ("olmoe", 16, 16, 16, 128, 0, None),
    "phi-2": ("phi", 32, 32, 32, 80, 0, None),
    "qwen3-8b": ("qwen3", 36, 32, 8, 128, 0, None),
    "phi-3-mini-4k-instruct": ("phi3", 32, 32, 32, 96, 2047, None),
    "starcoder2-3b": ("starcoder2", 30, 24, 2, 128, 4096, None),
    "falcon-7b": ("falcon", 32, 71, 1, 64, 0, None),
    "stablelm-2-1.6b": ("stablelm", 24, 32, 32, 64, 0, None),
    "smollm3-3b": ("smollm3", 36, 16, 4, 128, 0, None),
    "exaone-4.0-1.2b": ("exaone4", 30, 32, 8, 64, 0, "llama3"),
    "gemma-2b": ("gemma", 18, 8, 1, 256, 0, None),
    "gemma-3-1b-pt": ("gemma3_text", 26, 4, 1, 256, 512, None),
    "olmo-2-1124-7b-instruct": ("olmo2", 32, 32, 32, 128, 0, None),
    "granite-3.3-8b-instruct": ("granite", 40, 32, 8, 128, 0, None),
    "aya-23-8b": ("cohere", 32, 32, 8, 128, 0, None),
    "pythia-1b": ("gpt_neox", 16, 8, 8, 256, 0, None),
}


def test_every_public_config_is_shipped() -> None:
    assert {p.stem for p in CONFIGS.glob("*.json")} == set(EXPECTED)


@pytest.mark.parametrize("stem", sorted(EXPECTED))
def test_public_config_is_read_unchanged(stem: str) -> None:
    cfg = ModelConfig.from_hf(CONFIGS / f"{stem}.json")
    mt, layers, heads, kv, hd, window, rope = EXPECTED[stem]
    assert (cfg.model_type, cfg.layers, cfg.heads, cfg.kv_heads, cfg.head_dim,
            cfg.sliding_window) == (mt, layers, heads, kv, hd, window)
    assert dict(cfg.rope_scaling).get("rope_type") == rope
    raw = json.loads((CONFIGS / f"{stem}.json").read_text())
    assert (cfg.hidden, cfg.vocab) == (raw["hidden_size"], raw["vocab_size"])


def test_simulate_a_public_config(capsys) -> None:
    assert main(["simulate", "--model", str(CONFIGS / "smollm-135m.json"), "--hw",
                 "aim-gddr6", "--context", "256", "--db", "none", "--json"]) == 0
    fig = json.loads(capsys.readouterr().out)
    assert fig["latency_ns"] >= fig["bound_ns"] > 0
