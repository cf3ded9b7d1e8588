"""The walk-through of ``docs/adding-an-operator.md`` is code that works: its blocks,
written into folders of their own and registered with one line, make a family that the
capture finds, ``tune`` searches, ``compile`` lowers and ``run --check`` executes."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import transformers

import autosched.families
import autosched.pipeline
import search_spaces
from autosched.api import run_check
from autosched.families import registry
from autosched.pipeline import model_graph
from autosched.tune import tune
from experiments.archs import tiny_config
from search_spaces.workload import FAMILIES as DIMS

DOC = Path(__file__).resolve().parents[2] / "docs" / "adding-an-operator.md"
BLOCK = re.compile(r"```python\n# (\S+)\n(.*?)```", re.S)


def _blocks() -> dict[str, str]:
    """The doc's code blocks by the file each names on its first line."""
    return dict(BLOCK.findall(DOC.read_text()))


@pytest.fixture
def mish(tmp_path, monkeypatch):
    """The doc's family in temporary folders, registered with one line."""
    blocks = _blocks()
    assert set(blocks) == {"search_spaces/mish/__init__.py", "autosched/families/mish/pattern.py",
                           "autosched/families/mish/__init__.py"}
    for name, code in blocks.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(code)
    monkeypatch.setattr(search_spaces, "__path__",
                        [*search_spaces.__path__, str(tmp_path / "search_spaces")])
    monkeypatch.setattr(autosched.families, "__path__",
                        [*autosched.families.__path__, str(tmp_path / "autosched/families")])
    DIMS.reload()
    autosched.pipeline._captured.cache_clear()  # graphs captured before the family existed
    from autosched.families.mish import MishFamily

    monkeypatch.setitem(registry.FAMILIES, "mish", MishFamily())  # the one registry line
    yield
    for name in [n for n in sys.modules if n.endswith(".mish")]:
        del sys.modules[name]
    monkeypatch.undo()
    DIMS.reload()
    autosched.pipeline._captured.cache_clear()


def test_the_walkthrough_family_is_found_tuned_compiled_and_checked(mish, tmp_path):
    cfg = tiny_config("llama")
    cfg.hidden_act = "mish"
    model = transformers.LlamaForCausalLM(cfg)
    from autosched.frontend.module import init_weights

    init_weights(model, seed=3, norms="random")
    model.save_pretrained(tmp_path / "ckpt")
    _, graph = model_graph(str(tmp_path / "ckpt"), context=8)
    acts = [n for n in graph if n.workload.op == "mish"]
    assert [n.role for n in acts] == ["ffn_act", "ffn_act"]
    assert not [n for n in graph if n.workload.op == "extern"]  # nothing left on the host
    db = tmp_path / "t.db"
    rep = tune(str(tmp_path / "ckpt"), hw="aim-gddr6", context=8, trials=32, workers=1,
               db=db, cost_model="none", fusion="none")
    task = next(t for t in rep.tasks if t.workload.op == "mish")
    assert task.measurements >= 1 and task.tuned_ns >= task.bound_ns > 0
    check = run_check(str(tmp_path / "ckpt"), "aim-gddr6", steps=3, db=db)
    assert check.passed and check.tokens_match, check
