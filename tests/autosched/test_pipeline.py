"""The tune pipeline is straight: its inputs are resolved once, a candidate is lowered once."""

from __future__ import annotations

import json
from collections import Counter

from autosched.cli import main
from autosched.database import SqlDatabase
from autosched.families.registry import FAMILIES
from autosched.measure import LocalRunner
from autosched.search import SearchContext, tune_tasks
from cost_models import make_cost_model
from search_spaces import Schedule, Workload
from sim.hwio import load_hardware

TINY_HF = {"model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
           "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 2,
           "vocab_size": 256, "max_position_embeddings": 64, "torch_dtype": "float16"}


def test_one_tune_opens_the_database_once(tmp_path, monkeypatch) -> None:
    opened = []
    real = SqlDatabase.__init__

    def counting(self, where):
        opened.append(str(where))
        real(self, where)

    monkeypatch.setattr(SqlDatabase, "__init__", counting)
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps(TINY_HF))
    assert main(["tune", "--model", str(cfg), "--db", str(tmp_path / "t.db"), "--context",
                 "8", "--trials", "6", "--workers", "1", "--cost-model", "none",
                 "--quiet"]) == 0
    assert opened == [str(tmp_path / "t.db")]


def test_each_candidate_is_lowered_once(tmp_path, monkeypatch) -> None:
    """With a cost model ranking candidates, the search lowers each proposal once (the
    measurement reuses its program), however many rounds it runs."""
    hw = load_hardware("aim-gddr6")
    w = Workload.make("gemv", m=1, n=256, k=256)
    low = FAMILIES["gemv"]
    calls: Counter[str] = Counter()
    real = type(low).lower

    def counting(self, workload, point, hw_):
        calls[Schedule.of(self.space(workload, hw_), point).key] += 1
        return real(self, workload, point, hw_)

    monkeypatch.setattr(type(low), "lower", counting)
    with LocalRunner(1) as runner:
        res = tune_tasks([(w, 1)], SearchContext.of(
            hardware=hw, database=SqlDatabase(tmp_path / "t.db"), runner=runner, trials=24,
            cost_model=make_cost_model("bound")))
    assert res[0].measurements == 24
    assert calls and max(calls.values()) == 1, calls.most_common(3)
