"""The hardware file nothing was tuned for, and the physical limit the benchmark reports."""

from __future__ import annotations

import pytest

from autosched.api import simulate_model
from experiments.bench_new_hw import HW_FILE, bank_bytes, physical_limit_ns
from search_spaces import Workload
from sim.hwio import load_hardware


def test_the_file_loads_as_a_new_organisation() -> None:
    hw = load_hardware(HW_FILE)
    hbm = load_hardware("hbm-pim")
    assert hw.org.channels == 2 * hbm.org.channels and hw.pim.banks_per_unit == 1
    assert hw.pim.adder_tree and hw.pim.accum_dtype == "fp32"
    assert hw.fingerprint not in {load_hardware(p).fingerprint for p in ("hbm-pim", "aim-gddr6")}


def test_bank_bytes_count_weights_and_kv_cache() -> None:
    assert bank_bytes(Workload.make("gemv", m=1, n=64, k=32)) == 64 * 32 * 2
    att = Workload.make("attention", b=1, q=1, h=4, kvh=2, d=16, l=8)
    assert bank_bytes(att) == 2 * 2 * 8 * 16 * 2
    assert bank_bytes(Workload.make("rmsnorm", m=1, n=64)) == 0


def test_no_simulated_step_beats_the_physical_limit() -> None:
    hw = load_hardware(HW_FILE)
    limit = physical_limit_ns("llama-tiny", hw, 64)
    step = simulate_model("llama-tiny", hw, context=64, baseline=False)
    assert 0 < limit < step.latency_ns
    assert limit == pytest.approx(physical_limit_ns("llama-tiny", hw, 64))
