"""The contract every :class:`Runner` passes, as a pytest suite to subclass.

    class TestMyRunner(RunnerContract):
        @pytest.fixture
        def make_runner(self):
            return lambda **kw: MyRunner(..., **kw)

``make_runner(measure=..., timeout=...)`` returns a new runner; the suite closes it.
The measurement doubles below are module-level functions (picklable by reference), so
process pools and remote workers run them too. Importing this module needs pytest.
"""

from __future__ import annotations

import functools
import math
import os
import signal
import time

import pytest

from autosched.families.registry import family_of
from search_spaces import Schedule, Workload
from sim.errors import AutoschedError
from sim.hwio import load_hardware

from .base import MeasureInput, Runner, measure_one
from .record import Measurement

__all__ = ["RunnerContract", "contract_inputs", "dies_on", "hangs_on", "raises_on"]


@functools.lru_cache(maxsize=4)
def contract_inputs(n: int = 6) -> tuple[MeasureInput, ...]:
    """``n`` valid points of a small real GEMV on both presets, and one invalid point."""
    w = Workload.make("gemv", m=1, n=64, k=256)
    out = []
    for name in ("hbm-pim", "aim-gddr6"):
        hw = load_hardware(name)
        space = family_of(w).space(w, hw)
        points = list(space.enumerate())[:: 97][: n // 2]
        out += [MeasureInput(w, Schedule.of(space, p), hw) for p in points]
    bad = dict(out[0].schedule.point, k_split=3)  # not a divisor of 64: outside the space
    out.append(MeasureInput(w, Schedule.of(family_of(w).space(w, out[0].hw), bad), out[0].hw))
    return tuple(out)


def _raise_on(key: str, inp: MeasureInput) -> Measurement:
    if inp.schedule.key == key:
        raise ZeroDivisionError("a bug in the measurement")
    return measure_one(inp)


def _hang_on(key: str, inp: MeasureInput) -> Measurement:
    while inp.schedule.key == key:
        time.sleep(0.005)  # a hang: interrupted only by the runner's time limit
    return measure_one(inp)


def _die_on(key: str, marker: str | None, inp: MeasureInput) -> Measurement:
    if inp.schedule.key == key and (marker is None or not os.path.exists(marker)):
        if marker is not None:
            open(marker, "w").close()
        os.kill(os.getpid(), signal.SIGKILL)  # the worker dies mid-measurement
    return measure_one(inp)


def dies_on(key: str, marker: str | None = None):
    """A ``measure`` that kills its worker process on schedule ``key``: every time, or
    (``marker``: a file path) only the first time, which creates the file."""
    return functools.partial(_die_on, key, marker)


def raises_on(key: str):
    """A ``measure`` that has a bug (ZeroDivisionError) on schedule ``key``."""
    return functools.partial(_raise_on, key)


def hangs_on(key: str):
    """A ``measure`` that never returns on schedule ``key``."""
    return functools.partial(_hang_on, key)


class RunnerContract:
    """The :class:`Runner` contract; subclasses provide the ``make_runner`` fixture."""

    @pytest.fixture
    def inputs(self) -> list[MeasureInput]:
        return list(contract_inputs())

    def test_one_record_per_input_in_order_equal_to_in_process(self, make_runner, inputs):
        with make_runner() as runner:
            assert isinstance(runner, Runner)
            got = runner.run(inputs)
            again = runner.run(inputs[::-1])  # the runner is reusable
        want = [measure_one(i) for i in inputs]
        assert [m.schedule for m in got] == [i.schedule for i in inputs]
        assert got == want and again == want[::-1]  # deterministic values (not times)

    def test_a_failure_is_a_record(self, make_runner, inputs):
        with make_runner() as runner:
            got = runner.run(inputs)
        bad = got[-1]
        assert not bad.ok and math.isinf(bad.latency_ns) and "k_split=3" in bad.error
        assert all(m.ok for m in got[:-1])

    def test_empty_batch(self, make_runner):
        with make_runner() as runner:
            assert runner.run([]) == []

    def test_a_bug_raises_naming_the_input(self, make_runner, inputs):
        key = inputs[1].schedule.key
        with make_runner(measure=raises_on(key)) as runner, \
                pytest.raises(ZeroDivisionError) as info:
            runner.run(inputs)
        assert any(key in note for note in getattr(info.value, "__notes__", []))

    def test_a_hang_is_a_timed_out_failure(self, make_runner, inputs):
        key = inputs[2].schedule.key
        t0 = time.monotonic()
        with make_runner(measure=hangs_on(key), timeout=1.0) as runner:
            got = runner.run(inputs)
        assert time.monotonic() - t0 < 30
        assert not got[2].ok and "timed out after 1 s" in got[2].error
        assert [m.ok for m in got[:2]] == [True, True] and got[3].ok

    def test_close_is_idempotent_and_final(self, make_runner, inputs):
        runner = make_runner()
        runner.close()
        runner.close()
        with pytest.raises(AutoschedError, match="closed"):
            runner.run(inputs[:1])
