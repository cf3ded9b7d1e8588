"""The search: per-task tuners driven by Optuna ask/tell, and the task scheduler over them.

:class:`TaskTuner` tunes one workload (resumable from the database); :class:`TaskScheduler`
spends one measurement budget over many; :func:`tune_tasks` wires them for a model's
tasks.
"""

from .scheduler import Progress, TaskResult, TaskScheduler
from .study import SAMPLERS, SearchError, learns_validity, make_sampler, make_study
from .training import TrainingSet
from .tune import tune_tasks
from .tuner import TaskTuner

__all__ = ["SAMPLERS", "Progress", "SearchError", "TaskResult", "TaskScheduler", "TaskTuner",
           "TrainingSet", "learns_validity", "make_sampler", "make_study", "tune_tasks"]
