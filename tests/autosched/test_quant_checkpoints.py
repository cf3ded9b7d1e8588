"""Quantized weights in: compressed-tensors checkpoints made by compressed-tensors itself
(W8A16 and W4A16 with group 128, symmetric and asymmetric) through ``run --check`` on an
integer-capable variant, token for token against the dequantized ``transformers`` model's
``generate()``; the same checkpoint on a float-only preset says it is dequantized at load;
``--quantize`` on the fly; and the config rules."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("compressed_tensors")

from autosched.cli import main  # noqa: E402
from autosched.frontend.config import ModelError  # noqa: E402
from autosched.frontend.quantized import quant_fields  # noqa: E402

try:
    from .quant_checkpoints import SMALL, quantized_checkpoint
except ImportError:
    from quant_checkpoints import SMALL, quantized_checkpoint

KINDS = {"w4g128": (4, 128, True), "w4g128a": (4, 128, False), "w8": (8, None, True)}


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict:
    return {name: quantized_checkpoint(tmp_path_factory.mktemp(name), bits=b, group=g,
                                       symmetric=s, fmt="pack-quantized")
            for name, (b, g, s) in KINDS.items()}


@pytest.mark.parametrize("name,hw", [("w4g128", "aim-gddr6-int4"), ("w8", "hbm-pim-int8")])
def test_run_check_matches_the_quantized_generate(folders, capsys, name: str, hw: str) -> None:
    assert main(["run", "--model", str(folders[name]), "--hw", hw, "--check", "--steps", "8",
                 "--db", "none", "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["passed"] and rep["tokens_match"], rep
    assert [s["token"] for s in rep["steps"]] == rep["generated"] and len(rep["generated"]) == 8
    assert any(f":{name}" in line for line in rep["schedules"])


def test_the_format_is_said_where_the_units_do_not_take_it(folders, capsys) -> None:
    assert main(["run", "--model", str(folders["w4g128"]), "--hw", "aim-gddr6", "--check",
                 "--steps", "2", "--db", "none"]) == 0
    out = capsys.readouterr().out
    # the 14 linears of the two layers, fused by default into 8 (qkv, o, gate_up, down)
    assert "w4g128 on 8 linears: DEQUANTIZED AT LOAD to bf16" in out


def test_dequantized_weights_are_compressed_tensors_own(folders) -> None:
    from autosched.frontend.source import load_source

    src = load_source(str(folders["w4g128a"]))
    assert src.cfg.quant == "w4g128a" and src.cfg.quant_ignore == ("lm_head",)
    name = "model.layers.1.mlp.down_proj"
    mine = src.weights.get(name + ".weight")
    theirs = src.reference.get_submodule(name).weight.detach().numpy()
    assert np.array_equal(mine, theirs)


def test_quantize_on_the_fly_reports_the_cost(capsys, tmp_path) -> None:
    import torch
    import transformers

    torch.manual_seed(0)
    transformers.LlamaForCausalLM(transformers.LlamaConfig(**SMALL)).to(
        torch.float16).save_pretrained(tmp_path)
    assert main(["run", "--model", str(tmp_path), "--hw", "aim-gddr6-int4", "--quantize",
                 "w4g128", "--check", "--steps", "2", "--db", "none", "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["passed"] and 0 < rep["fp16_max_rel_err"] < 1  # random weights: a coarse W4


@pytest.mark.parametrize("change,why", [
    ({"format": "float-quantized"}, "format"),
    ({"quant_method": "gptq"}, "compressed-tensors"),
    ("acts", "activations"),
    ("bits3", "int4 or int8"),
])
def test_unsupported_quantization_configs_are_refused(change, why: str) -> None:
    qc = {"quant_method": "compressed-tensors", "format": "pack-quantized", "ignore": [],
          "config_groups": {"g": {"targets": ["Linear"], "weights": {
              "num_bits": 4, "type": "int", "strategy": "group", "group_size": 128,
              "symmetric": True}}}}
    assert quant_fields({"quantization_config": qc}, "m") == {"quant": "w4g128",
                                                              "quant_ignore": ()}
    if change == "acts":
        qc["config_groups"]["g"]["input_activations"] = {"num_bits": 8}
    elif change == "bits3":
        qc["config_groups"]["g"]["weights"]["num_bits"] = 3
    else:
        qc.update(change)
    with pytest.raises(ModelError, match=why):
        quant_fields({"quantization_config": qc}, "m")


@pytest.mark.parametrize("bits,group,sym,fmt", [(4, 32, False, "pack-quantized"),
                                                (4, 64, True, "pack-quantized"),
                                                (8, None, True, "int-quantized"),
                                                (8, 128, False, "pack-quantized")])
def test_every_scheme_reads_as_compressed_tensors_dequantizes_it(tmp_path, bits, group, sym,
                                                                 fmt) -> None:
    from autosched.frontend.source import load_source

    folder = quantized_checkpoint(tmp_path / "ck", bits=bits, group=group, symmetric=sym,
                                  fmt=fmt)
    src = load_source(str(folder))
    want = f"w{bits}" + (f"g{group}" if group else "") + ("" if sym else "a")
    assert src.cfg.quant == want
    for name in ("model.layers.0.self_attn.k_proj", "model.layers.1.mlp.up_proj"):
        mine = src.weights.get(name + ".weight")
        theirs = src.reference.get_submodule(name).weight.detach().numpy()
        assert np.array_equal(mine, theirs), name


def test_a_packed_tensor_of_the_wrong_shape_is_refused(folders, tmp_path) -> None:
    from safetensors.torch import load_file, save_file

    from autosched.frontend.source import load_source

    src = folders["w4g128"]
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "config.json").write_text((src / "config.json").read_text())
    tensors = load_file(src / "model.safetensors")
    name = "model.layers.0.mlp.up_proj.weight_packed"
    tensors[name] = tensors[name][:, :-1].contiguous()
    save_file(tensors, bad / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(ModelError, match="weight_packed has shape"):
        load_source(str(bad))
