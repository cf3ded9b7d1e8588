"""Optuna studies for the Optuna strategy: samplers by name, seeded, and the study that
drives them."""

from __future__ import annotations

import warnings

import optuna
from optuna.samplers import BaseSampler

from ..defaults import SAMPLERS
from .errors import SearchError

__all__ = ["CONSTRAINT", "SAMPLERS", "learns_validity", "make_sampler", "make_study"]

CONSTRAINT = "valid"  # trial constraint: violations of an invalid point (> 0 is infeasible)


def make_sampler(kind: str | BaseSampler, seed: int, *, multi_objective: bool = False
                 ) -> BaseSampler:
    """The sampler called ``kind``, seeded; an Optuna sampler instance passes through.

    ``tpe`` is multivariate grouped TPE with the constant liar (so one batch of asks spreads
    out); ``motpe`` is the same TPE, which handles several objectives (Optuna merged MOTPE
    into it); ``cmaes`` treats categorical parameters with a seeded random sampler and is
    single-objective only; ``nsga2`` is the genetic multi-objective sampler. TPE and NSGA-II
    read trial constraints, so points the tuner tells as infeasible (constraint
    :data:`CONSTRAINT`) teach them where the valid region is (:func:`learns_validity`).
    """
    if isinstance(kind, BaseSampler):
        return kind
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        if kind in ("tpe", "motpe"):
            return optuna.samplers.TPESampler(seed=seed, multivariate=True, group=True,
                                              constant_liar=True)
        if kind == "random":
            return optuna.samplers.RandomSampler(seed=seed)
        if kind == "nsga2":
            return optuna.samplers.NSGAIISampler(seed=seed)
        if kind == "cmaes":
            if multi_objective:
                raise SearchError("the cmaes sampler optimises one objective; use nsga2 or "
                                  "tpe with multi_objective=True")
            return optuna.samplers.CmaEsSampler(
                seed=seed, warn_independent_sampling=False,
                independent_sampler=optuna.samplers.RandomSampler(seed=seed))
    raise SearchError(f"unknown sampler {kind!r}; choose one of {', '.join(SAMPLERS)} "
                      "or pass an optuna sampler instance")


def learns_validity(sampler: BaseSampler) -> bool:
    """True for samplers that model the feasible region from trial constraints (TPE, NSGA-II).

    The tuner tells such a sampler's invalid points ``COMPLETE`` with a violated constraint
    and an infinite latency (constrained TPE never compares an infeasible trial's value;
    for NSGA-II it is dominated anyway); every other sampler gets them as ``FAIL`` and
    ignores them (CMA-ES would be misled by the infinite value).
    """
    return isinstance(sampler, optuna.samplers.TPESampler | optuna.samplers.NSGAIISampler)


def make_study(sampler: BaseSampler, *, multi_objective: bool, storage: str | None = None,
               study_name: str | None = None) -> optuna.Study:
    """A minimising study on (latency) or (latency, energy); in memory unless ``storage``.

    With an RDB ``storage`` URL an existing study of the same name is loaded, so several
    machines can tune one task together.
    """
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    directions = ["minimize", "minimize"] if multi_objective else ["minimize"]
    return optuna.create_study(storage=storage, sampler=sampler, study_name=study_name,
                               directions=directions, load_if_exists=storage is not None)
