"""The Optuna adapter: define-by-run suggest through ask/tell with real samplers, domains as
distributions, and telling a study about points measured elsewhere through create_trial +
distributions."""

import optuna
import pytest
from optuna.distributions import CategoricalDistribution, IntDistribution
from optuna.trial import TrialState, create_trial

from autosched.search.optuna_adapter import distribution, distributions, finished_trial, suggest
from search_spaces import (
    Categorical,
    Cond,
    Constraint,
    Divisors,
    IntRange,
    Param,
    PowersOfTwo,
    ScheduleError,
    Space,
    Var,
)

optuna.logging.set_verbosity(optuna.logging.ERROR)


def space() -> Space:
    return Space("tiny_gemv", 3, (
        Param("placement", Categorical(("pim", "host"))),
        Param("gb_tile", PowersOfTwo(16, 256), when=Cond("placement", "pim")),
        Param("batch", Divisors(8), when=Cond("placement", "pim")),
        Param("dbuf", Categorical((False, True)), when=Cond("placement", "pim")),
        Param("depth", IntRange(2, 8, step=2), when=Cond("dbuf", True)),
        Param("threads", IntRange(1, 16, log=True), when=Cond("placement", "host")),
    ), (Constraint("gb_fits", Var("gb_tile") * Var("batch") * (1 + Var("dbuf")), "<=", 512,
                   "{expr}={lhs} elements exceeds the global buffer ({rhs})"),))


def cost(point: dict) -> float:
    if point["placement"] == "host":
        return 100.0 / point["threads"]
    return 4096 / (point["gb_tile"] * point["batch"]) + point.get("depth", 0)


SAMPLERS = {
    "tpe": lambda: optuna.samplers.TPESampler(seed=0, n_startup_trials=5),
    "random": lambda: optuna.samplers.RandomSampler(seed=0),
    "nsga2": lambda: optuna.samplers.NSGAIISampler(seed=0, population_size=6),
}


@pytest.mark.parametrize("name", sorted(SAMPLERS))
def test_ask_tell_yields_valid_or_reported_points(name: str) -> None:
    s = space()
    directions = ["minimize", "minimize"] if name == "nsga2" else ["minimize"]
    study = optuna.create_study(sampler=SAMPLERS[name](), directions=directions)
    invalid = 0
    for _ in range(25):
        trial = study.ask()
        point = suggest(s, trial)
        assert trial.params == point
        assert s.validate(point, constraints=False) == []  # domains and conditions always hold
        reasons = s.validate(point)
        if reasons:
            assert all(r.startswith("gb_fits: ") for r in reasons)
            with pytest.raises(ScheduleError):
                s.check(point)
            invalid += 1
            study.tell(trial, state=TrialState.FAIL)
        else:
            c = cost(point)
            study.tell(trial, [c, float(len(point))] if name == "nsga2" else c)
    done = study.get_trials(states=(TrialState.COMPLETE,))
    assert len(done) + invalid == 25 and done


def test_conditional_params_absent_when_inactive() -> None:
    s = space()
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=3))
    seen = set()
    for _ in range(30):
        trial = study.ask()
        point = suggest(s, trial)
        seen.add(point["placement"])
        assert set(point) == set(s.active(point))
        study.tell(trial, 1.0)
    assert seen == {"pim", "host"}


def test_cmaes_on_int_space() -> None:
    pytest.importorskip("cmaes", reason="CmaEsSampler needs the optional cmaes package")
    s = Space("ints", 1, (Param("a", IntRange(0, 31)), Param("b", IntRange(1, 64, log=True))),
              (Constraint("sum", Var("a") + Var("b"), "<=", 80),))
    study = optuna.create_study(sampler=optuna.samplers.CmaEsSampler(seed=0, n_startup_trials=3))
    for _ in range(12):
        trial = study.ask()
        point = suggest(s, trial)
        assert s.validate(point) == [] or s.validate(point)[0].startswith("sum: ")
        study.tell(trial, float((point["a"] - 7) ** 2 + point["b"]))
    assert study.best_value >= 1.0


def test_create_trial_round_trip_then_sampling_continues() -> None:
    s = space()
    measured = [
        {"placement": "pim", "gb_tile": 64, "batch": 4, "dbuf": True, "depth": 4},
        {"placement": "pim", "gb_tile": 256, "batch": 2, "dbuf": False},
        {"placement": "host", "threads": 8},
    ]
    study = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=1, n_startup_trials=2))
    for p in measured:
        study.add_trial(create_trial(params=p, distributions=distributions(s, p), value=cost(p)))
    assert [t.params for t in study.trials] == measured
    assert study.best_trial.params == min(measured, key=cost)
    assert set(distributions(s, measured[2])) == {"placement", "threads"}
    for _ in range(5):
        trial = study.ask()
        point = suggest(s, trial)
        assert s.validate(point, constraints=False) == []
        study.tell(trial, cost(point))


def test_distributions_reject_points_outside_the_space() -> None:
    s = space()
    with pytest.raises(ScheduleError, match="gb_tile=48 is outside"):
        distributions(s, {"placement": "pim", "gb_tile": 48, "batch": 1, "dbuf": False})
    with pytest.raises(ScheduleError, match="inactive"):
        distributions(s, {"placement": "host", "threads": 2, "batch": 1})


def test_domains_become_distributions() -> None:
    assert distribution(IntRange(1, 9, step=2)) == IntDistribution(1, 9, step=2)
    assert distribution(IntRange(1, 64, log=True)) == IntDistribution(1, 64, log=True)
    assert distribution(PowersOfTwo(1, 8)) == CategoricalDistribution((1, 2, 4, 8))
    assert distribution(Divisors(6)) == CategoricalDistribution((1, 2, 3, 6))
    assert distribution(Categorical(("a", "b"))) == CategoricalDistribution(("a", "b"))


def test_finished_trials_complete_or_fail() -> None:
    s = space()
    p = {"placement": "host", "threads": 4}
    ok = finished_trial(s, p, [25.0])
    failed = finished_trial(s, p, None, {"error": "boom"})
    assert ok.state == TrialState.COMPLETE and ok.values == [25.0] and ok.params == p
    assert failed.state == TrialState.FAIL and failed.user_attrs == {"error": "boom"}
    study = optuna.create_study()
    study.add_trials([ok, failed])
    assert study.best_trial.params == p
