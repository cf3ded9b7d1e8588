"""The search context: everything one search run needs, resolved, in one frozen value.

Built once at the edge (``autosched.tune``, a benchmark, a test) from objects
(:class:`~sim.hardware.Hardware`, a :class:`~autosched.database.Database`, a
:class:`~autosched.measure.Runner`): the search never resolves a preset name, a path or
a URL. The strategy and the task scheduler may be given by name through
:meth:`SearchContext.of`, which turns each name into its object once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from cost_models.base import CostModel
from sim.hardware import Hardware

from ..database import Database
from ..measure import Runner
from .errors import SearchError
from .settings import SearchSettings
from .strategy import SearchStrategy

if TYPE_CHECKING:
    from optuna.samplers import BaseSampler

    from .results import Progress
    from .scheduler import TaskScheduler
    from .shared import Gate

__all__ = ["SearchContext"]

SchedulerFactory = Callable[..., "TaskScheduler"]


@dataclass(frozen=True, kw_only=True)
class SearchContext:
    """One search run: where, what with, how, and how much.

    ``hardware``, ``database`` and ``runner`` are the run's target, its measurements'
    home and its measuring back end (the caller opens and closes them). ``trials`` is
    the budget of *new* measurements over all tasks. ``strategy`` is an unbound
    :class:`SearchStrategy` that every task clones; ``scheduler`` builds the task
    scheduler from the tuners and this context (a :class:`TaskScheduler` subclass).
    ``cost_model`` ranks candidates (None: none); ``settings`` holds every knob;
    ``seed`` seeds everything (task i uses ``seed + i``). Per-run options:
    ``multi_objective`` (latency and energy), ``storage`` (an Optuna RDB URL for the
    studies), ``warmup`` (measurements per task before Ansor's score applies), ``batch``
    (measurements per round), ``plans`` (per fusion plan, the workload keys its graph
    runs with their counts), ``gate`` (a job shared with other processes,
    :func:`.shared.share`) and ``progress`` (called after every measured batch).
    """

    hardware: Hardware
    database: Database
    runner: Runner
    trials: int
    strategy: SearchStrategy
    scheduler: SchedulerFactory
    cost_model: CostModel | None = None
    settings: SearchSettings = field(default_factory=SearchSettings)
    seed: int = 0
    multi_objective: bool = False
    storage: str | None = None
    warmup: int = 4
    batch: int = 8
    plans: tuple[Mapping[str, int], ...] | None = None
    gate: Gate | None = None
    progress: Callable[[Progress], None] | None = None

    def __post_init__(self) -> None:
        for name, cls, how in (
                ("hardware", Hardware, "sim.hwio.load_hardware(name or file)"),
                ("database", Database, "autosched.database.open_database(path or URL)"),
                ("runner", Runner, "autosched.measure.make_runner(spec, workers)"),
                ("strategy", SearchStrategy, "SearchContext.of(strategy=name)"),
                ("settings", SearchSettings, "SearchSettings(...)")):
            if not isinstance(getattr(self, name), cls):
                raise SearchError(f"SearchContext.{name} must be a {cls.__name__} object, got "
                                  f"{getattr(self, name)!r}; resolve it at the edge with {how}")
        if self.cost_model is not None and not isinstance(self.cost_model, CostModel):
            raise SearchError(f"SearchContext.cost_model must be a CostModel or None, got "
                              f"{self.cost_model!r}; make one with "
                              "cost_models.make_cost_model(kind)")
        if not callable(self.scheduler):
            raise SearchError(f"SearchContext.scheduler must build a TaskScheduler, got "
                              f"{self.scheduler!r}; use SearchContext.of(scheduler=name)")
        if not isinstance(self.trials, int) or self.trials < 0:
            raise SearchError(f"trials must be an int >= 0, got {self.trials!r}")
        if not isinstance(self.warmup, int) or not isinstance(self.batch, int) \
                or self.warmup < 1 or self.batch < 1:
            raise SearchError(f"warmup and batch must be ints >= 1, got {self.warmup!r}, "
                              f"{self.batch!r}")
        if self.plans is not None:
            object.__setattr__(self, "plans", tuple(dict(p) for p in self.plans))

    @classmethod
    def of(cls, *, hardware: Hardware, database: Database, runner: Runner, trials: int,
           strategy: str | SearchStrategy | BaseSampler = "tpe",
           scheduler: str | SchedulerFactory = "gain",
           cost_model: str | CostModel | None = None, seed: int = 0,
           plans: Sequence[Mapping[str, int]] | None = None, **options: object
           ) -> SearchContext:
        """A context with the strategy, the scheduler and the cost model given by name or
        as objects (names resolved here, once: ``strategy`` is one of
        :data:`~autosched.defaults.STRATEGIES` or an Optuna sampler instance,
        ``scheduler`` one of :data:`~autosched.defaults.SCHEDULERS`, ``cost_model`` a
        :func:`cost_models.make_cost_model` kind or ``"none"``). ``options`` are the
        other fields."""
        from .registry import make_scheduler, make_strategy

        if isinstance(cost_model, str):
            from cost_models.registry import make_cost_model

            cost_model = None if cost_model == "none" else make_cost_model(cost_model, seed=seed)
        return cls(hardware=hardware, database=database, runner=runner, trials=trials,
                   strategy=make_strategy(strategy), scheduler=make_scheduler(scheduler),
                   cost_model=cost_model, seed=seed,
                   plans=None if plans is None else tuple(plans), **options)
