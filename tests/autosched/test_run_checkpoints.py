"""``autosched run --check`` on checkpoint folders written by ``save_pretrained``: the real
safetensors weights in simulated memory, token for token against ``transformers``' own
greedy ``generate()``, on both presets; and the Python API on a ``transformers`` model."""

from __future__ import annotations

import json

import pytest
import torch
import transformers

from autosched.api import compile_model, run_check, simulate_model
from autosched.cli import main

SMALL = dict(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, vocab_size=101, max_position_embeddings=64)
MODELS = {
    "llama": lambda: transformers.LlamaForCausalLM(transformers.LlamaConfig(**SMALL)),
    # a window of 4 positions, shorter than the 8 steps of the run
    "mistral": lambda: transformers.MistralForCausalLM(
        transformers.MistralConfig(**SMALL, sliding_window=4)),
    # q/k/v biases, LM head tied to the embedding table
    "qwen2": lambda: transformers.Qwen2ForCausalLM(
        transformers.Qwen2Config(**SMALL, tie_word_embeddings=True)),
}


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory) -> dict:
    out = {}
    for name, make in MODELS.items():
        torch.manual_seed(0)
        model = make().to(torch.float16)
        folder = tmp_path_factory.mktemp(name)
        model.save_pretrained(folder)
        out[name] = folder
    return out


@pytest.mark.parametrize("hw", ["hbm-pim", "aim-gddr6"])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_run_check_on_a_checkpoint_matches_generate(checkpoints, capsys, name: str,
                                                    hw: str) -> None:
    folder = checkpoints[name]
    assert main(["run", "--model", str(folder), "--hw", hw, "--check", "--steps", "8",
                 "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["passed"] and rep["tokens_match"], rep
    assert [s["token"] for s in rep["steps"]] == rep["generated"] and len(rep["generated"]) == 8


def test_the_device_reads_the_folders_own_tensors(checkpoints, tmp_path) -> None:
    """The device reads the folder's own tensors: scaling one in the file is caught."""
    from safetensors.torch import load_file, save_file

    folder = tmp_path / "bad"
    folder.mkdir()
    src = checkpoints["llama"]
    (folder / "config.json").write_text((src / "config.json").read_text())
    tensors = load_file(src / "model.safetensors")
    model = transformers.LlamaForCausalLM.from_pretrained(src)
    name = "model.layers.1.mlp.down_proj.weight"
    tensors[name] = tensors[name] * 3
    save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})
    rep = run_check(folder, "aim-gddr6", steps=2)
    assert rep.passed  # device and reference both read the changed file
    good = run_check(model, "aim-gddr6", steps=2)
    assert good.passed and good.steps[0]["max_abs_err"] != rep.steps[0]["max_abs_err"]


def test_python_api_takes_a_transformers_model(checkpoints) -> None:
    model = transformers.Qwen2ForCausalLM.from_pretrained(checkpoints["qwen2"])
    cm = compile_model(model, "hbm-pim", context=16)
    assert cm.graph.node("l0.qkv_proj").workload.attr("bias") == 1  # fused by default
    fig = simulate_model(model, "hbm-pim", context=16, baseline=False)
    assert fig.latency_ns >= fig.bound_ns > 0
    assert run_check(model, "hbm-pim", steps=3).passed


@pytest.mark.parametrize("name", ["llama", "qwen2"])
def test_the_full_fusion_plan_reads_every_norm_of_a_checkpoint(tmp_path, name: str) -> None:
    """Under the full plan every RMSNorm is absorbed (the first block's into the
    embedding, the others into the residual linears, the final one into the last down
    projection) and the argmax into the LM head; with every norm's weights drawn at
    random (a fresh model has them all at one), a norm read from the wrong tensor would
    move the logits: the run matches generate() token for token."""
    from search_spaces.fusion import FULL_FUSION

    torch.manual_seed(1)
    model = MODELS[name]().to(torch.float16)
    with torch.no_grad():
        for mod in model.modules():
            if type(mod).__name__.endswith("RMSNorm"):
                mod.weight.copy_(torch.empty_like(mod.weight).uniform_(0.5, 1.5))
    model.save_pretrained(tmp_path)
    rep = run_check(tmp_path, "hbm-pim", steps=6, fusion=dict(FULL_FUSION))
    assert rep.passed and rep.tokens_match, rep
    cm = compile_model(tmp_path, "hbm-pim", context=6, fusion=dict(FULL_FUSION))
    assert cm.graph.node("embed").workload.attr("epilogue") == "rmsnorm"
    assert cm.graph.node("lm_head").workload.attr("epilogue") == "argmax"
