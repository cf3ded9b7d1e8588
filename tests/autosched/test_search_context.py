"""The search context takes resolved objects and says where to resolve a name; the
settings refuse knobs that cannot work."""

from __future__ import annotations

import pytest

from autosched.database import open_database
from autosched.measure import LocalRunner
from autosched.search import (
    GainScheduler,
    OptunaSearch,
    SearchContext,
    SearchError,
    SearchSettings,
)
from sim.hwio import load_hardware


def test_names_of_hardware_database_or_runner_are_refused(tmp_path) -> None:
    hw, db, runner = load_hardware("hbm-pim"), open_database(tmp_path / "t.db"), LocalRunner(1)
    ctx = SearchContext.of(hardware=hw, database=db, runner=runner, trials=4)
    assert isinstance(ctx.strategy, OptunaSearch) and ctx.scheduler is GainScheduler
    assert ctx.cost_model is None and ctx.settings == SearchSettings()
    for field, value, fix in (("hardware", "hbm-pim", "load_hardware"),
                              ("database", str(tmp_path / "t.db"), "open_database"),
                              ("runner", "local", "make_runner")):
        kw = {"hardware": hw, "database": db, "runner": runner, field: value}
        with pytest.raises(SearchError, match=rf"SearchContext.{field} must be .*{fix}"):
            SearchContext.of(trials=4, **kw)
    with pytest.raises(SearchError, match="trials must be an int >= 0"):
        SearchContext.of(hardware=hw, database=db, runner=runner, trials=-1)
    with pytest.raises(SearchError, match="warmup and batch must be ints >= 1"):
        SearchContext.of(hardware=hw, database=db, runner=runner, trials=1, batch=0)
    plans = SearchContext.of(hardware=hw, database=db, runner=runner, trials=1,
                             plans=[{"a": 1}], cost_model="bound").plans
    assert plans == ({"a": 1},)


def test_settings_keep_todays_values_and_refuse_impossible_ones() -> None:
    s = SearchSettings()
    assert (s.ranked_asks, s.max_asks, s.noise_floor, s.enum_limit, s.history_limit) == \
        (2, 256, 0.01, 200_000, 512)
    with pytest.raises(SearchError, match="population must be an int >= 1"):
        SearchSettings(population=0)
    with pytest.raises(SearchError, match="surrogate_eta must be a number > 0"):
        SearchSettings(surrogate_eta=0.0)
    with pytest.raises(SearchError, match="epsilon < 1"):
        SearchSettings(epsilon=1.0)
    assert SearchSettings(n_explore=0, epsilon=0.0).n_explore == 0
