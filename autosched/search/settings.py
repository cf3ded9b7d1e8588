"""The search's knobs as one frozen value, with the figures the search was tuned with.

Every number that shapes which schedules get measured lives here and is passed in (in
:class:`~autosched.search.SearchContext`), never read from a module global, so a
benchmark can vary one knob and a run records what it used. The defaults are the values
the regression suite's tuned export and the search benchmarks were measured with:
change one and the search makes other measurements.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from .errors import SearchError

__all__ = ["SearchSettings"]


@dataclass(frozen=True)
class SearchSettings:
    """Knobs of the tuner, its candidate pool, the space surrogate, the cost model's
    training set, the task scheduler and the evolutionary strategy."""

    # -- proposals of one round (the tuner and the Optuna strategy)
    ask_factor: int = 4  # sampler asks per slot without a model (an ask costs O(trials))
    max_asks: int = 256  # upper bound on asks per round
    ranked_asks: int = 2  # sampler asks per round beside the model's own moves when a model ranks
    random_first: int = 6  # random unmeasured points per slot in a round with nothing measured yet
    n_second: int = 4  # moves drawn from each of the 2nd and 3rd best points
    n_two: int = 8  # two-change moves from the best point per round
    surrogate_factor: int = 2  # points per slot lowered because the space surrogate likes them
    n_explore: int = 2  # measured points per round drawn at random from outside the model's top
    # -- the model's outlook on a task (read by the task scheduler)
    outlook_picks: int = 8  # the surrogate's favourites an outlook lowers beside the moves
    outlook_random: int = 8  # random valid points an outlook lowers, for its surrogate
    prior_noise: float = 0.05  # the model's log2 error assumed before it has been checked
    noise_floor: float = 0.01  # never trust a predicted gain below 0.7 %
    noise_window: int = 16  # the model's error on a task: RMS of this many last predictions
    named_margin: float = 0.5  # log2: a named point predicted this much slower than the
    # default (and more than the model's noise) is ruled out, not measured in the warm-up
    # -- the candidate pool
    cache_limit: int = 20_000  # lowered candidates kept between rounds (a space's valid points fit)
    enum_limit: int = 200_000  # spaces up to this size are enumerated for random unmeasured points
    # -- the space surrogate (small: a few hundred rows of a few dozen slots)
    surrogate_trees: int = 40
    surrogate_depth: int = 5
    surrogate_eta: float = 0.3
    surrogate_rows: int = 8  # scored points the surrogate needs before it ranks the space
    # -- the cost model's training set
    history_limit: int = 512  # other tasks' measurements a run's model starts with (newest)
    # -- the task scheduler
    window: int = 8  # measurements over which Ansor's score reads a task's recent improvement
    floor: float = 0.02  # the least relative improvement Ansor's score assumes
    epsilon: float = 0.05  # chance that a round goes to a random live task
    # -- the evolutionary strategy
    population: int = 64  # parents kept and children bred per generation
    newcomers: int = 32  # random valid points joining the population each round (with a model)
    generations: int = 5  # generations bred per round under the cost model (1 without one)
    tournament: int = 3  # members drawn per tournament; the fittest becomes a parent
    crossover: float = 0.5  # chance that a child takes parameters from two parents

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            least = 0 if f.name in ("n_explore", "epsilon", "crossover", "noise_floor",
                                    "newcomers") else 1
            if f.type == "int" and (type(v) is not int or v < least):
                raise SearchError(f"SearchSettings.{f.name} must be an int >= {least}, got {v!r}")
            if f.type == "float" and not (isinstance(v, int | float) and v >= 0 and
                                           (v > 0 or least == 0)):
                raise SearchError(f"SearchSettings.{f.name} must be a number "
                                  f"{'>= 0' if least == 0 else '> 0'}, got {v!r}")
        if not self.epsilon < 1 or not self.crossover <= 1:
            raise SearchError(f"SearchSettings needs epsilon < 1 and crossover <= 1, got "
                              f"{self.epsilon}, {self.crossover}")
