"""collector_paused(): the cyclic collector is off inside, and its state comes back."""

from __future__ import annotations

import gc

import pytest

from sim.collector import collector_paused


def test_paused_inside_and_restored_after_nesting_and_errors() -> None:
    assert gc.isenabled()
    with collector_paused():
        assert not gc.isenabled()
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the inner block found it off and leaves it off
    assert gc.isenabled()
    with pytest.raises(ValueError), collector_paused():
        raise ValueError("inside")
    assert gc.isenabled()


def test_a_disabled_collector_stays_disabled() -> None:
    gc.disable()
    try:
        with collector_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_as_a_decorator() -> None:
    @collector_paused()
    def state() -> bool:
        return gc.isenabled()

    assert state() is False and gc.isenabled()
