"""The search: per-task tuners, pluggable strategies and task schedulers, one context.

:class:`SearchContext` carries one run (hardware, database, runner, cost model,
strategy, scheduler, settings, seed, budget); :func:`tune_tasks` runs it over a model's
tasks. A :class:`TaskTuner` tunes one workload (resumable from the database): its
:class:`SearchStrategy` proposes (:class:`OptunaSearch`: an Optuna sampler with the cost
model's moves, the default ``tpe``; :class:`EvolutionarySearch`), the cost model ranks,
the runner measures. A :class:`TaskScheduler` (:class:`GainScheduler`, the default;
:class:`RoundRobinScheduler`) spends one budget over many tasks. Every knob is a field of
:class:`SearchSettings`.
"""

from .context import SearchContext
from .errors import SearchError
from .evolution import EvolutionarySearch
from .gain import GainScheduler
from .optuna_search import OptunaSearch
from .registry import SCHEDULERS, STRATEGIES, make_scheduler, make_strategy
from .results import Progress, TaskResult
from .round_robin import RoundRobinScheduler
from .scheduler import TaskScheduler
from .settings import SearchSettings
from .strategy import SearchStrategy
from .study import SAMPLERS, learns_validity, make_sampler, make_study
from .training import TrainingSet
from .tune import tune_tasks
from .tuner import TaskTuner

__all__ = ["SAMPLERS", "SCHEDULERS", "STRATEGIES", "EvolutionarySearch", "GainScheduler",
           "OptunaSearch", "Progress", "RoundRobinScheduler", "SearchContext", "SearchError",
           "SearchSettings", "SearchStrategy", "TaskResult", "TaskScheduler", "TaskTuner",
           "TrainingSet", "learns_validity", "make_sampler", "make_scheduler",
           "make_strategy", "make_study", "tune_tasks"]
