"""Every runner passes the Runner contract: the local pool (in-process and two
processes) and the Dask runner on a local two-worker cluster."""

from __future__ import annotations

import pytest

from autosched.measure import DaskRunner, LocalRunner
from autosched.measure.contract import RunnerContract


class TestLocalInProcess(RunnerContract):
    @pytest.fixture
    def make_runner(self):
        return lambda **kw: LocalRunner(1, **kw)


class TestLocalPool(RunnerContract):
    @pytest.fixture
    def make_runner(self):
        return lambda **kw: LocalRunner(2, **kw)


class TestDask(RunnerContract):
    @pytest.fixture
    def make_runner(self, dask_cluster):
        return lambda **kw: DaskRunner(dask_cluster.address, **kw)
