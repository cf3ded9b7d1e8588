"""The public API: compile, simulate and check one model step, from names or objects.

Every function here is an edge: it takes what a user has (a built-in model name, a
``config.json`` or checkpoint path, a ``transformers`` model or config, a
:class:`~autosched.frontend.ModelConfig`; a preset or hardware/system file name, a
``Hardware`` or ``System``; a database path or URL or a ``Database``; a partition as
``"TPxPP"`` or a ``Partition``), resolves each once, and hands typed values to the
compiler (:mod:`autosched.compiler`), which never resolves a name again. A device is the
system of one; ``partition=None`` means one device on a device, the fastest partition
that fits on a system of several.

    >>> from autosched.api import simulate_model
    >>> simulate_model("llama-tiny", "hbm-pim", context=128).latency_ns  # doctest: +SKIP
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .compiler import CompiledStep, Partition, RunReport, StepFigures
from .ir import Step

__all__ = ["compile_model", "resolve", "run_check", "simulate_model"]


def _system(hw: Any):
    from sim.system import load_system

    return load_system(hw)


def _db(db: str | Path | Any | None):
    if db is None or hasattr(db, "best"):
        return db
    from .database import open_database

    return open_database(db)


def _partition(partition: str | Partition | None, step: Step, system: Any) -> Partition:
    from .compiler import best_partition, parse_partition

    if isinstance(partition, Partition):
        return partition
    if partition is None:
        return best_partition(step, system)
    return parse_partition(str(partition), step, system)


def resolve(model: Any, hw: Any = "hbm-pim", *, phase: str = "decode", batch: int = 1,
            context: int | None = None, capacity: int | None = None) -> tuple[Step, Any]:
    """(:class:`Step`, ``System``) of ``model`` on ``hw``."""
    from .pipeline import step_of

    return step_of(model, phase=phase, batch=batch, context=context,
                   capacity=capacity), _system(hw)


def compile_model(model: Any, hw: Any = "hbm-pim", *, phase: str = "decode", batch: int = 1,
                  context: int | None = None, capacity: int | None = None,
                  partition: str | Partition | None = None, db: Any = None,
                  **options: Any) -> CompiledStep:
    """The compiled step (:func:`autosched.compiler.compile_step`; ``options``: its
    keywords ``fusion``, ``schedules``, ``placement``, ``graph``, ``keep_outputs``,
    ``check``)."""
    from .compiler import compile_step

    step, system = resolve(model, hw, phase=phase, batch=batch, context=context,
                           capacity=capacity)
    if options.get("graph") is not None and partition is None:
        partition = Partition.single(step.model.layers)  # a given graph: one device's
    return compile_step(step, system, partition=_partition(partition, step, system),
                        db=_db(db), **options)


def simulate_model(model: Any, hw: Any = "hbm-pim", *, phase: str = "decode",
                   batch: int = 1, context: int | None = None,
                   partition: str | Partition | None = None, db: Any = None,
                   **options: Any) -> StepFigures:
    """The step's figures (:func:`autosched.compiler.simulate_step`; ``options``: its
    keywords ``fusion``, ``baseline``, ``graph``, ``schedules``, ``placement``, ``ops``)."""
    from .compiler import parse_partition, simulate_step

    step, system = resolve(model, hw, phase=phase, batch=batch, context=context)
    if partition is not None and not isinstance(partition, Partition):
        partition = parse_partition(str(partition), step, system)
    return simulate_step(step, system, partition=partition, db=_db(db), **options)


def run_check(model: Any, hw: Any = "hbm-pim", *, steps: int = 8,
              partition: str | Partition | None = None, db: Any = None,
              **options: Any) -> RunReport:
    """Greedy generation on the functional simulator, every step compared with the
    ``transformers`` model (:func:`autosched.compiler.run_check`; ``options``: ``seed``,
    ``first_token``, ``fusion``, ``schedules``)."""
    from .compiler import run_check as check

    step, system = resolve(model, hw, context=steps)
    return check(model, system, partition=_partition(partition, step, system), steps=steps,
                 db=_db(db), **options)
