"""The evolutionary strategy: a population bred by the space's own moves and crossover.

The parents are the ``population`` fastest measured points of the task (elitist: a
measurement only ever improves them). A child is drawn by tournament selection (the
fittest of ``tournament`` members drawn at random), crossed with a second tournament
winner with probability ``crossover`` (parameter by parameter through the space's own
conditions: a parameter takes either parent's value when it is active in that parent,
its domain's first value when it is active in neither), then mutated by one random
neighbourhood move (:func:`.moves.one_change`) that keeps the space's constraints.
Children that are measured, invalid or bred twice are dropped.

With a cost model, fitness is the model's score (parents included, so one scale). A
round's population is the parents and ``newcomers`` random valid points (all
``population`` of them random while nothing is measured), and ``generations``
generations are bred from it, each keeping the ``population`` fittest of population and
children: the model plays the simulator while the population evolves, and every
newcomer and child of the round is a candidate the tuner ranks and measures the top of
(as it ranks the Optuna strategy's). Without one, fitness is the measured latency and
one generation of as many children as there are measurements to make is proposed in
breeding order. Random valid points top up a round that bred too few children (the
first one, without a model), so the strategy stops only when the space is measured out.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from autosched.measure.record import Measurement
from search_spaces import Space

from .errors import SearchError
from .moves import one_change
from .strategy import SearchStrategy, check_unbound

if TYPE_CHECKING:
    from .tuner import TaskTuner

__all__ = ["EvolutionarySearch", "crossover", "mutate"]


def crossover(space: Space, a: dict, b: dict, rng: np.random.Generator) -> dict:
    """A child taking each active parameter from parent ``a`` or ``b`` at random (where it
    is active in both), under the space's conditions (constraints are not checked)."""
    def choose(p) -> object:
        options = [x[p.name] for x in (a, b) if p.name in x]
        if not options:
            return p.domain.values()[0]
        return options[int(rng.integers(len(options)))]

    return space.fill(choose)


def mutate(space: Space, point: dict, rng: np.random.Generator) -> dict | None:
    """A random one-change neighbour of ``point`` that satisfies the space's constraints
    (None: no neighbour does)."""
    near = list(one_change(space, point))
    for i in rng.permutation(len(near)):
        if not space.validate(near[i]):
            return near[i]
    return None


class EvolutionarySearch(SearchStrategy):
    """A seeded (mu + lambda) evolutionary search; see the module docstring. Serves the
    latency objective only."""

    name = "evolutionary"

    def __init__(self) -> None:
        self.task: TaskTuner | None = None
        self.parents: dict[str, tuple[dict, float]] = {}  # key -> (point, latency ns)

    def clone(self) -> EvolutionarySearch:
        return EvolutionarySearch()

    def bind(self, task: TaskTuner) -> None:
        check_unbound(self)
        if task.multi_objective:
            raise SearchError("the evolutionary strategy optimises latency alone; use the "
                              "tpe, motpe or nsga2 strategy with multi_objective=True")
        self.task = task
        self.observe([m for m in task.measurements if task.expressible(m)])

    def observe(self, measurements: Sequence[Measurement]) -> None:
        self.update(measurements)

    def update(self, measurements: Sequence[Measurement]) -> None:
        """Admit the successful measurements; keep the ``population`` fastest as parents."""
        for m in measurements:
            if m.ok and self.task.expressible(m):
                self.parents[m.schedule.key] = (m.schedule.point, m.latency_ns)
        best = sorted(self.parents.items(), key=lambda kv: (kv[1][1], kv[0]))
        self.parents = dict(best[:self.task.settings.population])

    # ----------------------------------------------------------------- one round
    def propose(self, n_measure: int) -> list[dict]:
        task, pool = self.task, self.task.pool
        ranked, taken = task.cost_model is not None, task.measured_keys
        rng = task.rng(4)
        for p in task.named_due:
            pool.add(p, taken, build_it=ranked)
        if len(pool.pending) < n_measure:
            pop = [p for p, _ in self.parents.values()]
            if ranked:
                self._evolve(pop, rng)
            elif pop:
                self._breed(pop, [lat for _, lat in self.parents.values()], rng,
                            n_measure - len(pool.pending))
            for p in pool.unmeasured(rng, n_measure - len(pool.pending), taken):
                pool.add(p, taken, build_it=ranked)  # newcomers: a start, or too few children
        return [e.point for e in pool.pending.values()]

    def _evolve(self, pop: list[dict], rng: np.random.Generator) -> None:
        """Breed ``generations`` generations on the cost model's scores; every child stays
        pending for the tuner to rank."""
        task, pool, s = self.task, self.task.pool, self.task.settings
        n_new = s.population if not pop else s.newcomers  # nothing measured: all newcomers
        pop = [p for p in pop if pool.candidate(p) is not None]
        pop += [p for p in pool.unmeasured(rng, n_new, task.measured_keys)
                if pool.add(p, task.measured_keys, build_it=True)]
        fit = self._scores(pop)
        for _ in range(s.generations):
            children = self._breed(pop, fit, rng, s.population)
            if not children:
                break
            pop, fit = pop + children, fit + self._scores(children)
            order = np.argsort(fit, kind="stable")[:s.population]
            pop, fit = [pop[i] for i in order], [fit[i] for i in order]

    def _scores(self, points: list[dict]) -> list[float]:
        if not points:
            return []
        cands = [self.task.pool.candidate(p) for p in points]
        return [float(v) for v in np.asarray(self.task.cost_model.predict(cands), dtype=float)]

    def _breed(self, pop: list[dict], fit: list[float], rng: np.random.Generator,
               n: int) -> list[dict]:
        """Up to ``n`` new valid children of ``pop`` (fitness ``fit``, lower is fitter),
        each made pending (lowered when a model ranks); at most ``4 n`` draws."""
        task, pool, s = self.task, self.task.pool, self.task.settings
        if not pop:
            return []
        ranked, taken = task.cost_model is not None, task.measured_keys
        children: list[dict] = []
        for _ in range(4 * n):
            if len(children) >= n:
                break
            child = pop[self._tournament(fit, rng)]
            if len(pop) > 1 and rng.random() < s.crossover:
                child = crossover(task.space, child, pop[self._tournament(fit, rng)], rng)
            child = mutate(task.space, child, rng)
            if child is not None and pool.add(child, taken, build_it=ranked):
                children.append(child)
        return children

    def _tournament(self, fit: list[float], rng: np.random.Generator) -> int:
        """The index of the fittest of ``tournament`` members drawn with replacement."""
        drawn = rng.integers(len(fit), size=self.task.settings.tournament)
        return int(min(drawn, key=lambda i: (fit[i], i)))
