"""Measurement: turn (workload, schedule, hardware) into a :class:`Measurement` record.

:class:`Runner` is the seam where measurement back ends plug in (its docstring states
the contract, which :mod:`autosched.measure.contract` checks): :class:`LocalRunner` runs
the cycle-level simulator in a local process pool, :class:`DaskRunner` on a Dask
cluster; :func:`make_runner` picks one by name.
"""

from .base import MeasureInput, Runner, measure_one
from .dask import DaskRunner, RunnerError, RunnerLost
from .deadline import MEASURE_TIMEOUT_S, MeasureTimeout
from .local import LocalRunner
from .spec import TlsFiles, check_runner, farm_security, make_runner

__all__ = ["MEASURE_TIMEOUT_S", "DaskRunner", "LocalRunner", "MeasureInput", "MeasureTimeout",
           "Runner", "RunnerError", "RunnerLost", "TlsFiles", "check_runner", "farm_security",
           "make_runner", "measure_one"]
