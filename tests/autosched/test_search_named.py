"""The warm-up measures a named point only where the cost model cannot rule it out: the
shipped library GEMV, several times slower than the default, is dropped under the
pretrained model and kept without a model; the default is never dropped."""

from __future__ import annotations

from autosched.measure import LocalRunner
from autosched.search import TaskTuner
from autosched.search.context import SearchContext
from cost_models import make_cost_model
from search_spaces import Workload
from sim.hwio import load_hardware

try:
    from .search_fakes import context
except ImportError:
    from search_fakes import context

HW = load_hardware("hbm-pim")
W = Workload.make("gemv", m=1, n=256, k=688)  # library kernel ~10x the default on hbm-pim


def _tuner(tmp_path, model) -> TaskTuner:
    with LocalRunner(1) as r:
        ctx: SearchContext = context(HW, tmp_path / "t.db", r, cost_model=model, seed=0)
        return TaskTuner(W, 1, ctx)


def test_a_library_point_the_model_rules_out_is_not_measured(tmp_path):
    t = _tuner(tmp_path, make_cost_model("pretrained"))
    assert t.named_pending == 2  # default and library
    dropped = t.rule_out_named()
    assert len(dropped) == 1 and t.default.key not in dropped
    assert t.named_due == [t.default.point]


def test_without_a_model_every_named_point_is_measured(tmp_path):
    t = _tuner(tmp_path, None)
    assert t.rule_out_named() == []
    assert t.named_pending == 2
