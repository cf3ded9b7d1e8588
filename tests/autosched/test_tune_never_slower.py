"""``tune`` never stores a step slower than the default one: the real pipeline on
llama-tiny at batch 1, 8 and 32 and in prefill, a small budget each (a small budget is
where a tuned mix loses most easily), and the step compiled from the database afterwards
is the one the report names."""

from __future__ import annotations

import pytest

from autosched.compiler import simulate_step
from autosched.database import open_database
from autosched.frontend import get_model_config
from autosched.pipeline import step_of
from autosched.tune import tune
from sim.system import load_system

CASES = [("decode", 1), ("decode", 8), ("decode", 32), ("prefill", 1)]


@pytest.mark.parametrize(("phase", "batch"), CASES)
def test_tuned_step_is_never_slower_than_the_default(tmp_path, phase, batch):
    db = open_database(tmp_path / "t.db")
    rep = tune("llama-tiny", phase=phase, batch=batch, context=64, trials=4, db=db,
               workers=1, cost_model="none", fusion="none", seed=1)
    e = rep.end_to_end
    assert e.tuned_ns <= e.default_ns
    assert e.schedules in ("tuned", "default")
    step = step_of(get_model_config("llama-tiny"), phase=phase, batch=batch, context=64)
    again = simulate_step(step, load_system("hbm-pim"), db=db, baseline=False, ops=False)
    assert again.latency_ns == pytest.approx(e.tuned_ns)
    assert again.placement == e.placement
