"""DeviceMemory: lazy rows, rounding on write, vectorised row writes, bounds."""

from __future__ import annotations

import numpy as np
import pytest

from sim.errors import SimError
from sim.functional import DeviceMemory, round_to
from sim.hwio import load_hardware

HW = load_hardware("hbm-pim")


def test_unwritten_memory_reads_zero_and_allocates_nothing() -> None:
    mem = DeviceMemory(HW)
    np.testing.assert_array_equal(mem.read(63, 15, HW.org.rows_per_bank - 1, 0, 8), np.zeros(8))
    assert mem.rows_allocated == 0


def test_write_rounds_to_bank_dtype_and_reads_back() -> None:
    mem = DeviceMemory(HW)
    v = np.array([1.0 + 2.0**-12, 3.3, -7.1], np.float32)
    mem.write(2, 5, 100, 40, v)
    np.testing.assert_array_equal(mem.read(2, 5, 100, 40, 3), round_to(v, "fp16"))
    assert mem.read(2, 5, 100, 39, 1)[0] == 0
    assert mem.read(2, 4, 100, 40, 1)[0] == 0  # neighbouring bank untouched
    assert mem.rows_allocated == 1


def test_bf16_device_stores_bf16() -> None:
    hw = load_hardware("aim-gddr6")
    mem = DeviceMemory(hw)
    mem.write(0, 0, 0, 0, np.array([1.0 + 2.0**-9], np.float32))
    assert mem.read(0, 0, 0, 0, 1)[0] == 1.0


def test_write_must_fit_in_the_row() -> None:
    mem = DeviceMemory(HW)
    with pytest.raises(SimError, match="do not fit in a row of 512"):
        mem.write(0, 0, 0, 500, np.ones(13, np.float32))
    with pytest.raises(SimError, match="bank outside"):
        mem.write(0, 16, 0, 0, np.ones(1, np.float32))
    with pytest.raises(SimError, match="row outside"):
        mem.read(0, 0, HW.org.rows_per_bank, 0, 1)


def test_write_rows_places_each_row() -> None:
    mem = DeviceMemory(HW)
    rng = np.random.default_rng(0)
    ch, bank, row = np.array([0, 63, 7, 7]), np.array([0, 15, 3, 4]), np.array([9, 9, 2, 16000])
    data = rng.standard_normal((4, HW.row_elems)).astype(np.float32)
    mem.write_rows(ch, bank, row, data)
    for i in range(4):
        got = mem.read(int(ch[i]), int(bank[i]), int(row[i]), 0, HW.row_elems)
        np.testing.assert_array_equal(got, round_to(data[i], "fp16"))
    assert mem.rows_allocated == 3


def test_write_rows_checks_shapes() -> None:
    mem = DeviceMemory(HW)
    with pytest.raises(SimError, match=r"data of shape \(n, 512\)"):
        mem.write_rows(np.zeros(2), np.zeros(2), np.zeros(2), np.zeros((2, 100)))
