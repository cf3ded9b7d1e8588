"""Measurement: success and failure records, bugs surface, the process pool matches in-process."""

from __future__ import annotations

import math
import os
import signal

import pytest

from autosched.families.registry import FAMILIES
from autosched.measure import (
    LocalRunner,
    MeasureInput,
    Runner,
    RunnerError,
    check_runner,
    make_runner,
    measure_one,
)
from search_spaces import Schedule, Workload
from sim import SIM_VERSION
from sim.errors import AutoschedError
from sim.hwio import load_hardware

try:
    from .search_fakes import FakeGemvLowering
except ImportError:
    from search_fakes import FakeGemvLowering

W = Workload.make("gemv", m=1, n=64, k=256)


class BuggyLowering(FakeGemvLowering):
    """Raises a plain bug (not an AutoschedError) for split 4."""

    def lower(self, workload, point, hw):
        if point["k_split"] == 4:
            raise ZeroDivisionError("a bug in the code generator")
        return super().lower(workload, point, hw)


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeGemvLowering:
    low = FakeGemvLowering(fail=lambda p: p["k_split"] == 2 and p["mode"] == "lane")
    monkeypatch.setitem(FAMILIES, "gemv", low)
    return low


def _inputs(low: FakeGemvLowering, hw_name: str) -> list[MeasureInput]:
    hw = load_hardware(hw_name)
    space = low.space(W, hw)
    return [MeasureInput(W, Schedule.of(space, p), hw) for p in space.enumerate()]


@pytest.mark.parametrize("hw_name", ["hbm-pim", "aim-gddr6"])
def test_success_record(fake: FakeGemvLowering, hw_name: str) -> None:
    hw = load_hardware(hw_name)
    sched = Schedule.of(fake.space(W, hw), fake.default(W, hw))
    m = measure_one(MeasureInput(W, sched, hw))
    assert m.ok and not m.error
    assert m.workload == W and m.schedule == sched
    assert (m.hw_fingerprint, m.hw_name, m.sim_version) == (hw.fingerprint, hw.name, SIM_VERSION)
    assert m.bound_ns == fake.bound(W, hw) > 0
    assert m.latency_ns >= m.bound_ns and m.energy_pj > 0


def test_failure_records_keep_the_reason(fake: FakeGemvLowering) -> None:
    hw = load_hardware("aim-gddr6")
    space = fake.space(W, hw)
    refused = {"mode": "lane", "k_split": 2, "loop_order": "row_outer", "interleave": False,
               "double_buffer": False}
    m = measure_one(MeasureInput(W, Schedule.of(space, refused), hw))
    assert not m.ok and math.isinf(m.latency_ns) and "fake lowering refuses" in m.error
    outside = dict(refused, k_split=3)  # not a power of two: rejected before any code
    m = measure_one(MeasureInput(W, Schedule.of(space, outside), hw))
    assert not m.ok and "k_split=3 is outside" in m.error
    kernel_says_no = dict(refused, mode="dot", k_split=1, interleave=True)
    m = measure_one(MeasureInput(W, Schedule.of(space, kernel_says_no), hw))
    assert not m.ok and "interleave" in m.error


def test_pool_equals_in_process(fake: FakeGemvLowering) -> None:
    inputs = _inputs(fake, "hbm-pim")[:24] + _inputs(fake, "aim-gddr6")[:24]
    with LocalRunner(1) as one:
        serial = one.run(inputs)
    with LocalRunner(2) as two:
        pooled = two.run(inputs)
        again = two.run(inputs[::-1])  # the pool is reused
    assert len(serial) == len(inputs)
    assert pooled == serial and again == serial[::-1]
    assert [m.schedule for m in pooled] == [i.schedule for i in inputs]
    assert any(not m.ok for m in pooled) and any(m.ok for m in pooled)


@pytest.mark.parametrize("workers", [1, 2])
def test_a_bug_propagates_naming_the_input(monkeypatch: pytest.MonkeyPatch, workers: int) -> None:
    low = BuggyLowering()
    monkeypatch.setitem(FAMILIES, "gemv", low)
    inputs = _inputs(low, "hbm-pim")
    bad = next(i for i in inputs if i.schedule.point["k_split"] == 4)
    with LocalRunner(workers) as runner, pytest.raises(ZeroDivisionError) as info:
        runner.run(inputs)
    assert bad.schedule.key in "".join(info.value.__notes__)  # the first failing input
    assert any("while measuring gemv:m=1,n=64,k=256" in n for n in info.value.__notes__)


def test_runner_contract_checks() -> None:
    with pytest.raises(AutoschedError, match="workers >= 1"):
        LocalRunner(0)
    runner = LocalRunner(2)
    assert isinstance(runner, Runner) and runner.workers == 2
    runner.close()
    runner.close()  # idempotent
    with pytest.raises(AutoschedError, match="closed"):
        runner.run([])


def _interrupted(inp: MeasureInput):
    """Ctrl-C reaches the worker in the middle of a measurement."""
    os.kill(os.getpid(), signal.SIGINT)
    return measure_one(inp)


def test_pool_workers_ignore_ctrl_c(fake: FakeGemvLowering) -> None:
    inputs = _inputs(fake, "hbm-pim")[:8]
    with LocalRunner(2, measure=_interrupted) as runner:
        got = runner.run(inputs)
    assert got == [measure_one(i) for i in inputs]


@pytest.mark.parametrize("spec, address", [
    (None, None), ("local", None), ("dask://10.0.0.5:8786", "tcp://10.0.0.5:8786"),
    ("tcp://h:1", "tcp://h:1")])
def test_runner_names(spec, address) -> None:
    assert check_runner(spec) == address


@pytest.mark.parametrize("spec", ["dask://host", "dask://:8786", "dask://h:0", "pool", "dask://h:x"])
def test_bad_runner_names_say_what_is_expected(spec) -> None:
    with pytest.raises(RunnerError, match="is not 'local' or dask://HOST:PORT"):
        check_runner(spec)


def test_make_runner_builds_the_local_pool_with_its_limit() -> None:
    with make_runner("local", 3, timeout=5.0) as runner:
        assert isinstance(runner, LocalRunner) and (runner.workers, runner.timeout) == (3, 5.0)
    with pytest.raises(AutoschedError, match="time limit must be > 0"):
        LocalRunner(1, timeout=0)
