"""Measurement: turn (workload, schedule, hardware) into a :class:`Measurement` record.

:class:`Runner` is the seam where measurement back ends plug in; :class:`LocalRunner`
runs the cycle-level simulator in a local process pool.
"""

from .base import MeasureInput, Runner, measure_one
from .local import LocalRunner

__all__ = ["LocalRunner", "MeasureInput", "Runner", "measure_one"]
