"""GEMV over integer weight formats: packed codes in the banks on units that take them
(values, time against the float kernel, bound, bytes), dequantized at load elsewhere."""

from __future__ import annotations

import numpy as np
import pytest

from autosched.families import family_of
from autosched.families.gemv.formats import dequant_site
from search_spaces import Workload
from sim.formats import dequantize, quantize_rtn, weight_format
from sim.functional import round_to
from sim.hwio import load_hardware
from sim.timing import simulate


def _run(dtype: str, hw_name: str, n: int = 96, k: int = 512):
    hw = load_hardware(hw_name)
    w = Workload.make("gemv", dtype, m=1, n=n, k=k)
    fam = family_of(w)
    kern = fam.lower(w, fam.default(w, hw), hw)
    rng = np.random.default_rng(0)
    wt = rng.standard_normal((n, k)).astype(np.float32)
    if weight_format(dtype).quantized:
        wt = dequantize(quantize_rtn(wt, weight_format(dtype)), "fp16")
    x = rng.standard_normal((1, k)).astype(np.float32)
    y = kern.run(hw, {"x": x, "W": wt})
    want = round_to(x, hw.pim.dtype).astype(np.float64) @ \
        round_to(wt, hw.pim.dtype).astype(np.float64).T
    return hw, w, fam, kern, y, want


@pytest.mark.parametrize("dtype,hw_name", [("w4g128", "aim-gddr6-int4"),
                                           ("w4g32a", "aim-gddr6-int4"),
                                           ("w8", "aim-gddr6-int8"), ("w8", "hbm-pim-int8")])
def test_packed_gemv_matches_and_is_marked(dtype: str, hw_name: str) -> None:
    hw, w, fam, kern, y, want = _run(dtype, hw_name)
    assert dequant_site(w, hw) == "bank"
    kind = weight_format(dtype).kind
    assert f'"fmt":"{kind}"' in kern.program.to_json().replace(" ", "")
    assert np.abs(y - want).max() <= 1e-3 * np.abs(want).max()
    assert simulate(kern.program, hw).latency_ns >= fam.bound(w, hw)


def test_unsupported_format_is_dequantized_at_load() -> None:
    hw, w, fam, kern, y, want = _run("w4g128", "aim-gddr6")
    assert dequant_site(w, hw) == "load" and "fmt" not in kern.program.to_json()
    assert fam.weight_bytes(w, hw) == 96 * 512 * 2
    assert np.abs(y - want).max() <= 1e-3 * np.abs(want).max()


def test_int4_in_bank_is_four_times_denser_and_faster() -> None:
    hw = load_hardware("aim-gddr6-int4")
    lat, rows = {}, {}
    for dt in ("fp16", "w8", "w4g128"):
        w = Workload.make("gemv", dt, m=1, n=4096, k=4096)
        fam = family_of(w)
        lat[dt] = simulate(fam.lower(w, fam.default(w, hw), hw).program, hw).latency_ns
        rows[dt] = fam.weight_bytes(w, hw)
    assert rows["w4g128"] < 0.27 * rows["fp16"] and rows["w8"] < 0.51 * rows["fp16"]
    assert lat["fp16"] / lat["w4g128"] > 3.0 and lat["fp16"] / lat["w8"] > 1.7


@pytest.mark.parametrize("hw_name,dtype", [("aim-gddr6-int4", "w4g128"), ("hbm-pim-int8", "w8")])
def test_the_host_reads_packed_rows_and_dequantizes(hw_name: str, dtype: str) -> None:
    hw = load_hardware(hw_name)
    w = Workload.make("gemm", dtype, m=16, n=256, k=512)
    fam = family_of(w)
    point = fam.side_point(w, hw, "host")
    kern = fam.lower(w, point, hw)
    assert f'"fmt":"{weight_format(dtype).kind}"' in kern.program.to_json().replace(" ", "")
    rng = np.random.default_rng(1)
    wt = dequantize(quantize_rtn(rng.standard_normal((256, 512)).astype(np.float32),
                                 weight_format(dtype)), "fp16")
    x = rng.standard_normal((16, 512)).astype(np.float32)
    want = round_to(x, hw.pim.dtype).astype(np.float64) @ \
        round_to(wt, hw.pim.dtype).astype(np.float64).T
    y = kern.run(hw, {"x": x, "W": wt})
    assert np.abs(y - want).max() <= 1e-3 * np.abs(want).max()
    assert simulate(kern.program, hw).latency_ns >= fam.bound(w, hw)
    big = Workload.make("gemm", dtype, m=64, n=4096, k=4096)  # weight reuse: the host's
    assert family_of(big).default(big, hw)["placement"] == "host"
