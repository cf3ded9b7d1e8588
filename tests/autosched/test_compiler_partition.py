"""Partitions of a model over a system: candidates, splits, the ranking that picks one."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from autosched.compiler.choose import choose_partition
from autosched.compiler.partition import Partition, candidates, tp_reasons
from autosched.frontend import get_model_config
from autosched.pipeline import step_of
from sim.system import load_system


@settings(max_examples=30, deadline=None, derandomize=True)
@given(tp=st.integers(1, 16), pp=st.integers(1, 80), layers=st.integers(1, 80))
def test_even_stages_cover_every_layer_once(tp: int, pp: int, layers: int) -> None:
    pp = min(pp, layers)
    part = Partition.even(tp, pp, layers)
    assert part.stages[0][0] == 0 and part.stages[-1][1] == layers
    assert all(a[1] == b[0] for a, b in zip(part.stages, part.stages[1:], strict=False))
    sizes = [b - a for a, b in part.stages]
    assert min(sizes) >= 1 and max(sizes) - min(sizes) <= 1
    assert part.devices == tp * pp and part.devices_of(pp - 1)[-1] == tp * pp - 1


def test_candidates_split_evenly() -> None:
    cfg = get_model_config("llama2-70b")  # 64 heads, 8 KV heads, 28672, 32000
    assert tp_reasons(cfg, 8) == [] and tp_reasons(cfg, 16)  # 8 KV heads
    tps = {p.tp for p in candidates(cfg, load_system("hbm-pim-x16"))}
    assert tps == {1, 2, 4, 8}


def test_70b_needs_nine_devices_and_the_fastest_fitting_comes_first() -> None:
    sysm = load_system("hbm-pim-x16")
    rows = choose_partition(step_of("llama2-70b", context=128), sysm)
    fit = [r for r in rows if r["fits"]]
    assert fit and rows[: len(fit)] == fit
    assert [r["estimate_ns"] for r in fit] == sorted(r["estimate_ns"] for r in fit)
    # 138 GB of FP16 weights: a device holds 17.2 GB, so no share of 8 devices fits
    assert min(r["partition"].devices for r in fit) >= 9
    assert all(r["bytes_per_device"] <= sysm.device.capacity_bytes for r in fit)
    assert not any(r["fits"] for r in rows if r["partition"].devices <= 8)
