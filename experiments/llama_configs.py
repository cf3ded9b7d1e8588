"""Random Llama-family configs and the check every one must pass.

``sample_config(pick)`` draws a Hugging Face ``config.json`` dict: llama, mistral or
qwen2; head dim 16..128 (any even value, sometimes given explicitly), GQA ratio 1..7,
odd intermediate and vocabulary sizes, 1-3 layers, tied or not, 16-bit dtypes, every
RoPE scaling type (linear, dynamic, yarn, llama3, longrope) or none, sliding windows
shorter than the run (mistral, qwen2), attention and MLP biases (llama). ``pick`` is a
:class:`Picker`: a seeded numpy generator here, hypothesis in the tests.

``check(hf, hw, steps)``: compile (every kernel and the linked program validated),
simulate at or above the bound, and ``run --check`` against ``transformers`` itself.
The outcome is ``pass``, ``refused`` (autosched refused it with one line and
``transformers`` cannot run it either) or ``failed`` (anything else).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

__all__ = ["Outcome", "Picker", "RngPicker", "check", "sample_config"]


class Picker(Protocol):
    """A source of choices: integers in ``[lo, hi]`` and one of ``options``."""

    def int(self, lo: int, hi: int) -> int: ...

    def choice(self, options: list) -> Any: ...


class RngPicker:
    """Choices from a seeded numpy generator."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)

    def int(self, lo: int, hi: int) -> int:
        return int(self.rng.integers(lo, hi + 1))

    def choice(self, options: list) -> Any:
        return options[int(self.rng.integers(len(options)))]


def _rope(p: Picker, head_dim: int, mt: str) -> dict | None:
    kind = p.choice([None, "linear", "dynamic", "yarn", "llama3", "longrope"])
    if kind is None:
        return None
    factor = float(p.choice([2.0, 4.0, 8.0]))
    if kind in ("linear", "dynamic"):
        return {"rope_type": kind, "factor": factor}
    if kind == "yarn":
        return {"rope_type": "yarn", "factor": factor, "original_max_position_embeddings": 32}
    if kind == "llama3":
        return {"rope_type": "llama3", "factor": factor, "low_freq_factor": 1.0,
                "high_freq_factor": 4.0, "original_max_position_embeddings": 32}
    half = head_dim // 2
    return {"rope_type": "longrope", "original_max_position_embeddings": 32,
            "short_factor": [1.0 + i / half for i in range(half)],
            "long_factor": [factor + i / half for i in range(half)]}


def sample_config(p: Picker) -> dict[str, Any]:
    """One random Llama-family ``config.json`` (see the module docstring)."""
    mt = p.choice(["llama", "mistral", "qwen2"])
    kv, ratio = p.int(1, 3), p.int(1, 7)
    heads, head_dim = kv * ratio, 2 * p.int(8, 64)
    explicit = p.choice([False, True])
    hidden = heads * (2 * p.int(4, 40) if explicit else head_dim)
    hf: dict[str, Any] = {
        "model_type": mt, "hidden_size": hidden, "intermediate_size": 2 * p.int(8, 150) + 1,
        "num_hidden_layers": p.int(1, 3), "num_attention_heads": heads,
        "num_key_value_heads": kv, "vocab_size": 2 * p.int(25, 350) + 1,
        "max_position_embeddings": 64, "rms_norm_eps": p.choice([1e-5, 1e-6]),
        "rope_theta": p.choice([10000.0, 500000.0]), "hidden_act": "silu",
        "tie_word_embeddings": p.choice([False, True]),
        "torch_dtype": p.choice(["float16", "bfloat16"]),
    }
    if explicit:
        hf["head_dim"] = head_dim
    rope = _rope(p, head_dim, mt)
    if rope is not None:
        hf["rope_scaling"] = rope
    if mt == "llama":
        hf["attention_bias"] = p.choice([False, True])
        hf["mlp_bias"] = p.choice([False, True])
    elif mt == "mistral":
        hf["sliding_window"] = p.choice([None, p.int(2, 6)])
    else:
        hf["use_sliding_window"] = p.choice([False, True])
        hf["sliding_window"] = p.int(2, 6)
        hf["max_window_layers"] = p.int(0, hf["num_hidden_layers"])
    return hf


def _transformers_runs(hf: dict[str, Any]) -> bool:
    """Whether ``transformers`` itself builds the model and runs two tokens through it."""
    import torch
    from transformers import CONFIG_MAPPING, AutoModelForCausalLM

    try:
        model = AutoModelForCausalLM.from_config(CONFIG_MAPPING[hf["model_type"]].from_dict(hf))
        with torch.no_grad():
            model(input_ids=torch.tensor([[1, 2]]))
    except Exception:  # noqa: BLE001 - any failure means transformers cannot run it
        return False
    return True


@dataclass(frozen=True)
class Outcome:
    """``status`` pass | refused | failed, and why."""

    status: str
    message: str = ""
    latency_over_bound: float = math.nan
    max_rel_err: float = math.nan


def check(hf: dict[str, Any], hw: str, *, steps: int = 8, seed: int = 0,
          fusion: dict | None = None) -> Outcome:
    """Compile, simulate and run ``hf`` on ``hw`` (see the module docstring); ``fusion``:
    a fusion plan for both (None: unfused)."""
    from autosched.api import run_check, simulate_model
    from autosched.frontend import ModelConfig, ModelError

    try:
        cfg = ModelConfig.from_hf(hf, name="sampled")
        fig = simulate_model(cfg, hw, context=steps, baseline=False, fusion=fusion or {})
        if not fig.latency_ns >= fig.bound_ns > 0:
            return Outcome("failed", f"latency {fig.latency_ns} below bound {fig.bound_ns}")
        rep = run_check(cfg, hw, steps=steps, seed=seed, fusion=fusion)
    except ModelError as e:
        if _transformers_runs(hf):
            return Outcome("failed", f"refused a config transformers runs: {e}")
        return Outcome("refused", str(e))
    except Exception as e:  # noqa: BLE001 - the sweep counts every other error as a failure
        return Outcome("failed", f"{type(e).__name__}: {e}")
    ratio = fig.latency_ns / fig.bound_ns
    if not rep.passed:
        return Outcome("failed", f"run --check: max rel err {rep.max_rel_err:.3g} (tolerance "
                                 f"{rep.tolerance:.3g}), tokens {[r['token'] for r in rep.steps]}"
                                 f" vs transformers {list(rep.generated)}", ratio,
                       rep.max_rel_err)
    return Outcome("pass", "", ratio, rep.max_rel_err)
