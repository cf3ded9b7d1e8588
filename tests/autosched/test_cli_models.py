"""``autosched models``: every built-in with its shapes and parameter count."""

from __future__ import annotations

import json

from autosched.cli import main
from autosched.cli.models_cmd import parameter_count
from autosched.frontend import get_model_config, list_models


def test_lists_every_builtin(capsys):
    assert main(["models"]) == 0
    out = capsys.readouterr().out
    for name in list_models():
        assert name in out


def test_json_and_known_parameter_count(capsys):
    assert main(["models", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["name"] for r in rows] == list_models()
    # Llama-2-7B has 6,738,415,616 parameters.
    assert parameter_count(get_model_config("llama2-7b")) == 6_738_415_616


def test_large_builtins_match_published_parameter_counts():
    # the counts the published checkpoints report (safetensors index totals / 2 bytes)
    assert parameter_count(get_model_config("llama2-13b")) == 13_015_864_320
    assert parameter_count(get_model_config("llama2-70b")) == 68_976_648_192
    assert parameter_count(get_model_config("llama3-70b")) == 70_553_706_496
