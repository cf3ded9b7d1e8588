"""The linker: fragments chained through global buffers, rows planned, channels refined."""

from __future__ import annotations

import numpy as np
import pytest

from autosched.codegen import Fragment, link
from sim.errors import SimError
from sim.functional import DeviceMemory, execute, round_to
from sim.hwio import load_hardware
from sim.kernels import GemvOpts, gemv
from sim.kernels.gemv_host import gemv_host
from sim.timing import simulate
from sim.validate import validate


def _chain_tensors(seed: int, n: int, k: int) -> tuple[np.ndarray, ...]:
    """W1 [n, k], W2 [24, n] and x [1, k] of small integers (exact in fp16 and bf16)."""
    rng = np.random.default_rng(seed)
    return tuple(rng.integers(-1, 2, shape).astype(np.float32)
                 for shape in ((n, k), (24, n), (1, k)))


@pytest.mark.parametrize("hw_name", ["hbm-pim", "aim-gddr6"])
def test_two_gemvs_chain_through_a_global_buffer(hw_name: str) -> None:
    hw = load_hardware(hw_name)
    w1, w2, x = _chain_tensors(0, 48, 40)
    k1 = gemv(hw, 48, 40)
    k2 = gemv(hw, 24, 48, opts=GemvOpts(k_split=2))  # two channel slices: refinement
    linked = link([Fragment("a", k1, (("x", "in"), ("y", "h"))),
                   Fragment("b", k2, (("x", "h"), ("y", "out")))], hw,
                  constants=frozenset({"in"}), outputs=frozenset({"out"}))
    validate(linked.program, hw)
    names = {s.name for s in linked.program.streams}
    assert {"pim0", "pim1", "host"} <= names  # the k-split cut the channels in two groups
    base_a, rows_a = linked.rows["a"]
    assert linked.rows["b"][0] == base_a + rows_a  # disjoint row ranges
    mem = DeviceMemory(hw)
    linked.place(mem, {"a": {"W": w1}, "b": {"W": w2}})
    out = execute(linked.program, hw, mem, linked.bind({"in": x}))
    want = (x @ w1.T) @ w2.T  # small integers: exact in fp16 and bf16
    np.testing.assert_array_equal(out["out"].reshape(1, 24), want)
    res = simulate(linked.program, hw)
    alone = simulate(k1.program, hw).latency_ns + simulate(k2.program, hw).latency_ns
    assert res.latency_ns >= 0.9 * alone  # serialised by the host hand-offs
    assert "h" not in out and round_to(out["arena.fp32"], "fp32").size >= 48  # h: in the arena


@pytest.mark.parametrize("hw_name", ["hbm-pim", "aim-gddr6"])
def test_weights_staged_on_the_host_take_no_device_memory(hw_name: str) -> None:
    hw = load_hardware(hw_name)
    w1, w2, x = _chain_tensors(1, 64, 40)
    k1, k2 = gemv_host(hw, 64, 40, 1, GemvOpts()), gemv_host(hw, 24, 64, 1, GemvOpts())
    assert k1.staged == ("Wl",)
    linked = link([Fragment("a", k1, (("x", "in"), ("y", "h"))),
                   Fragment("b", k2, (("x", "h"), ("y", "out")))], hw,
                  constants=frozenset({"in"}), outputs=frozenset({"out"}))
    validate(linked.program, hw)
    sizes = {b.name: b.size * 2 for b in linked.program.buffers}
    staged = [n for n in sizes if n.startswith("stage.")]
    assert staged and sizes[staged[0]] >= 2 * 64 * 40  # the larger layout, read out whole
    assert linked.budget.activations < sizes[staged[0]]  # the device does not hold it
    mem = DeviceMemory(hw)
    linked.place(mem, {"a": {"W": w1}, "b": {"W": w2}})
    out = execute(linked.program, hw, mem, linked.bind({"in": x}))
    np.testing.assert_array_equal(out["out"].reshape(1, 24), (x @ w1.T) @ w2.T)


def test_capacity_is_a_budget_that_names_every_region() -> None:
    d = load_hardware("aim-gddr6").to_dict()
    hw = load_hardware({**d, "org": {**d["org"], "rows_per_bank": 96}})
    k = gemv(hw, 4096, 4096)  # 64 rows per bank each: two do not fit in 96
    frags = [Fragment(t, k, (("x", "in"), ("y", t))) for t in ("a", "b")]
    linked = link(frags, hw, constants=frozenset({"in"}))
    b = linked.budget
    assert b.weights == 128 * b.row_index and not b.fits
    with pytest.raises(SimError, match=r"needs [\d.]+ GB \(weights [\d.]+, KV cache 0.00, .* "
                                       r"the device has 0.10 GB"):
        b.check("two GEMVs")
