"""Hostile checkpoint folders (issue 29): an index naming a file outside the folder, a
folder of pickle files only, weights that are NaN or of another shape. Each is refused in
one line before ``transformers`` loads anything; no pickle file is ever opened."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
import transformers

from autosched.cli import main

SMALL = dict(hidden_size=64, intermediate_size=96, num_hidden_layers=1, num_attention_heads=4,
             num_key_value_heads=2, vocab_size=101, max_position_embeddings=64)


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(transformers.LlamaConfig(**SMALL)).to(torch.float16)
    folder = tmp_path_factory.mktemp("good")
    model.save_pretrained(folder)
    return model, folder


@pytest.fixture
def no_pickle(monkeypatch):
    """Fail the test if anything unpickles a file."""
    opened = []

    def refuse(*args, **kwargs):
        opened.append(args[0] if args else kwargs)
        raise AssertionError("a pickle file was opened")

    monkeypatch.setattr(torch, "load", refuse)
    return opened


def _run(folder, capsys) -> str:
    assert main(["run", "--model", str(folder), "--check", "--steps", "2"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    return err


def test_an_index_naming_a_shard_outside_the_folder_is_never_followed(saved, tmp_path,
                                                                      no_pickle, capsys):
    model, good = saved
    folder = tmp_path / "ck"
    shutil.copytree(good, folder)
    (folder / "model.safetensors").unlink()
    names = list(model.state_dict())
    (folder / "model.safetensors.index.json").write_text(json.dumps(
        {"metadata": {}, "weight_map": {n: "../x.pt" for n in names}}))
    torch.save({"x": torch.zeros(1)}, tmp_path / "x.pt")
    assert "shard '../x.pt' is outside the folder" in _run(folder, capsys)
    assert no_pickle == []


def test_a_folder_of_pickle_weights_only_is_refused_naming_what_it_holds(saved, tmp_path,
                                                                        no_pickle, capsys):
    model, good = saved
    folder = tmp_path / "ck"
    folder.mkdir()
    shutil.copy(good / "config.json", folder / "config.json")
    (folder / "pytorch_model.bin").write_bytes(b"pickled weights, never opened")
    err = _run(folder, capsys)
    assert "has no usable weights (found: config.json, pytorch_model.bin)" in err
    assert "never pickle" in err and no_pickle == []


def _with(good, tmp_path, name: str, tensor) -> object:
    from safetensors.torch import load_file, save_file

    folder = tmp_path / "ck"
    folder.mkdir()
    shutil.copy(good / "config.json", folder / "config.json")
    tensors = load_file(good / "model.safetensors")
    tensors[name] = tensor(tensors[name])
    save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})
    return folder


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_nan_or_infinite_weights_are_refused(saved, tmp_path, capsys, value):
    name = "model.layers.0.mlp.down_proj.weight"

    def poison(t):
        t = t.clone()
        t[0, 0] = value
        return t

    folder = _with(saved[1], tmp_path, name, poison)
    assert f"tensor {name} holds NaN or infinite values" in _run(folder, capsys)


def test_a_tensor_of_another_shape_or_type_is_refused(saved, tmp_path, capsys):
    name = "model.layers.0.self_attn.o_proj.weight"
    folder = _with(saved[1], tmp_path, name, lambda t: t[:, :32].contiguous())
    assert f"tensor {name} has shape [64, 32], the config says [64, 64]" in _run(folder, capsys)
    shutil.rmtree(folder)
    folder = _with(saved[1], tmp_path, name, lambda t: t.to(torch.int8))
    assert f"tensor {name} is I8" in _run(folder, capsys)


def test_a_checkpoint_missing_a_tensor_is_refused(saved, tmp_path, capsys):
    from safetensors.torch import load_file, save_file

    folder = tmp_path / "ck"
    folder.mkdir()
    shutil.copy(saved[1] / "config.json", folder / "config.json")
    tensors = load_file(saved[1] / "model.safetensors")
    del tensors["model.norm.weight"]
    save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})
    assert "has no tensor model.norm.weight" in _run(folder, capsys)


def test_the_good_checkpoint_still_runs(saved, capsys):
    assert main(["run", "--model", str(saved[1]), "--check", "--steps", "2"]) == 0
    assert "PASS" in capsys.readouterr().out
