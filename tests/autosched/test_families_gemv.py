"""The gemv/gemm lowering: every point builds, validates, times above both bounds and
computes the right numbers.

Data are small integers (x in {-1, 1}, W, norm_w in {-1, 0, 1}, b and r in -3..3): every
product and partial sum is an integer of magnitude <= k + 6, exact in fp16/bf16 inputs
and in fp16 (up to 2048) or fp32 accumulators, and the rmsnorm of a +-1 row with eps=0
is the row itself (sqrt(1) = 1). So the GEMV, bias and add are compared exactly; silu_mul
runs in float32 on exact inputs with numpy's formula, compared to 1e-6 relative (a few
float32 ulps).
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

from autosched.families import FAMILIES, build, family_of
from autosched.families.gemv import gemv_bound_terms
from search_spaces import ScheduleError, Space, Workload
from sim.bound import bound
from sim.hwio import load_hardware
from sim.isa import HostOp
from sim.timing import simulate
from sim.validate import validate

HW = {name: load_hardware(name) for name in ("hbm-pim", "aim-gddr6")}
ATTRS = [{}, {"prologue": "rmsnorm", "eps": 0.0}, {"bias": 1}, {"epilogue": "add"},
         {"epilogue": "silu_mul"}, {"prologue": "rmsnorm", "eps": 0.0, "bias": 1,
                                    "epilogue": "silu_mul"}]
SHAPES = [(1, 40, 64), (3, 96, 250), (2, 34, 130)]


@functools.cache
def space_of(hw_name: str, m: int, n: int, k: int) -> Space:
    """The schedule space of an m x n x k GEMV (a GEMM has the same)."""
    w = Workload.make("gemv", m=m, n=n, k=k)
    return family_of(w).space(w, HW[hw_name])


def pim_point(space: Space, seed: int) -> dict:
    """A seeded draw of a valid PIM point, each parameter uniform over its domain (the
    host placement has its own test)."""
    rng = np.random.default_rng(seed)
    while (point := space.sample(rng, 1)[0])["placement"] != "pim":
        pass
    return point


def sampled_cases() -> list[tuple[str, tuple[int, int, int], dict, bool, int]]:
    """Every (preset, attrs) pair once; per preset each shape twice and every (shape, op)
    pair once; each attrs as a GEMV on one preset and a GEMM on the other."""
    return [(hw_name, SHAPES[(i + j) % len(SHAPES)], attrs, (i + j) % 2 == 1,
             j + len(ATTRS) * i)
            for i, hw_name in enumerate(sorted(HW)) for j, attrs in enumerate(ATTRS)]


def tensors(w: Workload) -> tuple[dict, np.ndarray]:
    """Inputs, constants and weights of ``w``, and the float64 reference output."""
    d, a = w.dims, dict(w.attrs)
    m, n, k = d["m"], d["n"], d["k"]
    rng = np.random.default_rng(m * 1000 + n + k)
    x = rng.choice([-1.0, 1.0], (m, k)).astype(np.float32)
    t = {"x": x, "W": rng.integers(-1, 2, (n, k)).astype(np.float32)}
    xn = x
    if a.get("prologue") == "rmsnorm":
        t["norm_w"] = rng.integers(-1, 2, k).astype(np.float32)
        xn = x * t["norm_w"]
    z = xn.astype(np.float64) @ t["W"].T
    if a.get("bias"):
        t["b"] = rng.integers(-3, 4, n).astype(np.float32)
        z = z + t["b"]
    if a.get("epilogue") == "add":
        t["r"] = rng.integers(-3, 4, (m, n)).astype(np.float32)
        z = z + t["r"]
    if a.get("epilogue") == "silu_mul":
        g = z[:, : n // 2].astype(np.float32)
        z = (g / (np.float32(1) + np.exp(-g))) * z[:, n // 2:].astype(np.float32)
    return t, z


def check_point(w: Workload, point: dict, hw_name: str) -> None:
    hw = HW[hw_name]
    low = family_of(w)
    kern = build(w, point, hw)
    validate(kern.program, hw)
    lat = simulate(kern.program, hw).latency_ns
    assert lat >= bound(kern.program, hw).ns
    assert lat >= low.bound(w, hw), (point, lat, gemv_bound_terms(w, hw))
    t, ref = tensors(w)
    y = kern.run(hw, t)
    assert y.shape == ref.shape
    if w.attr("epilogue") == "silu_mul":
        np.testing.assert_allclose(y, ref, rtol=1e-6, atol=0)
    else:
        np.testing.assert_array_equal(y, ref)


def test_sampled_cases_cover_every_preset_shape_attrs_and_op() -> None:
    cases = sampled_cases()
    assert {(c[0], str(c[2])) for c in cases} == {(h, str(a)) for h in HW for a in ATTRS}
    for hw_name in HW:
        assert {(c[1], c[3]) for c in cases if c[0] == hw_name} == {
            (s, g) for s in SHAPES for g in (False, True)}
    assert {(str(c[2]), c[3]) for c in cases} == {(str(a), g) for a in ATTRS
                                                  for g in (False, True)}


def case_id(v: object) -> str:
    """A readable test id for one field of a sampled case."""
    if isinstance(v, tuple):
        return "x".join(map(str, v))
    if isinstance(v, dict):
        return "+".join(x if isinstance(x, str) else k for k, x in v.items()) or "plain"
    if isinstance(v, bool):
        return "gemm" if v else "gemv"
    return str(v)


@pytest.mark.parametrize("hw_name, shape, attrs, gemm, seed", sampled_cases(), ids=case_id)
def test_sampled_points_build_time_and_compute(hw_name, shape, attrs, gemm, seed):
    m, n, k = shape
    point = pim_point(space_of(hw_name, m, n, k), seed)
    w = Workload.make("gemm" if gemm else "gemv", m=m, n=n, k=k, attrs=attrs)
    check_point(w, point, hw_name)


@pytest.mark.parametrize("hw_name", sorted(HW))
@pytest.mark.parametrize("attrs", ATTRS)
def test_default_and_host_placement(hw_name, attrs):
    for op, (m, n, k) in (("gemv", (1, 40, 64)), ("gemm", (5, 34, 130))):
        w = Workload.make(op, m=m, n=n, k=k, attrs=attrs)
        check_point(w, family_of(w).default(w, HW[hw_name]), hw_name)
        check_point(w, {"placement": "host"}, hw_name)


def test_interface_conventions():
    assert FAMILIES["gemv"] is FAMILIES["gemm"]
    hw = HW["hbm-pim"]
    w = Workload.make("gemv", m=2, n=34, k=64, attrs={"prologue": "rmsnorm", "bias": 1,
                                                      "epilogue": "add", "eps": 1e-5})
    low = family_of(w)
    assert low.tensors(w) == ("W",)
    kern = build(w, None, hw)
    assert kern.inputs == ("x", "b", "r", "norm_w") and kern.output == "y"
    assert kern.input_shapes == ((2, 64), (34,), (2, 34), (64,))
    for point in (None, {"placement": "host"}):  # the prologue, then one op finishes
        ops = [nd.kind for s in build(w, point, hw).program.streams for nd in s.body
               if isinstance(nd, HostOp)]
        assert ops[0] == "rmsnorm" and ops[-1] in ("gemv_out", "matmul_layout", "matmul")
        assert not {"add", "silu_mul", "copy"} & set(ops)
    assert kern.output_shape == (2, 34)
    silu = Workload.make("gemv", m=2, n=34, k=64, attrs={"epilogue": "silu_mul"})
    assert build(silu, {"placement": "host"}, hw).output_shape == (2, 17)


def test_prologue_gates_the_pim_streams():
    hw = HW["aim-gddr6"]
    w = Workload.make("gemv", m=1, n=40, k=64, attrs={"prologue": "rmsnorm"})
    prog = build(w, None, hw).program
    host = next(s for s in prog.streams if s.engine == "host")
    kinds = [getattr(n, "kind", type(n).__name__) for n in host.body]
    assert kinds[:2] == ["rmsnorm", "Signal"]
    for s in prog.streams:
        if s.engine == "pim":
            assert s.body[0].tokens == ("start",)


def test_invalid_point_and_attrs_are_rejected():
    hw = HW["hbm-pim"]
    w = Workload.make("gemv", m=1, n=64, k=64)
    bad = {**family_of(w).default(w, hw), "gb_tile": 128, "double_buffer": True}
    with pytest.raises(ScheduleError, match="gb_fits"):
        build(w, bad, hw)
    with pytest.raises(ScheduleError, match="mode is given but inactive"):
        build(w, {"placement": "host", "mode": "bcast"}, hw)
    odd = Workload.make("gemv", m=1, n=33, k=64, attrs={"epilogue": "silu_mul"})
    with pytest.raises(Exception, match="even n"):
        build(odd, None, hw)


@pytest.mark.parametrize("hw_name", sorted(HW))
def test_bound_picks_the_cheaper_placement(hw_name):
    hw = HW[hw_name]
    decode = gemv_bound_terms(Workload.make("gemv", m=1, n=4096, k=4096), hw)
    assert decode["bound"] == decode["pim"] < decode["host"]
    big = gemv_bound_terms(Workload.make("gemm", m=4096, n=4096, k=4096), hw)
    assert big["bound"] == big["host"] < big["pim"]


@pytest.mark.parametrize("hw_name", sorted(HW))
@pytest.mark.parametrize("m", [1, 3])
def test_layernorm_prologue_normalises_x_first(hw_name: str, m: int) -> None:
    """A ``layernorm`` prologue (scale and shift) centres and scales each row of ``x``
    before the GEMV, in the banks and on the host; the two placements agree with the
    family's float64 reference to the device type's rounding of the normalised row."""
    hw, k, n = HW[hw_name], 130, 34
    w = Workload.make("gemv" if m == 1 else "gemm", m=m, n=n, k=k,
                      attrs={"prologue": "layernorm", "eps": 1e-5, "bias": 1})
    rng = np.random.default_rng(7)
    t = {"x": rng.normal(2.0, 3.0, (m, k)).astype(np.float32),
         "W": rng.integers(-1, 2, (n, k)).astype(np.float32),
         "b": rng.integers(-3, 4, n).astype(np.float32),
         "norm_w": rng.uniform(0.5, 1.5, k).astype(np.float32),
         "norm_b": rng.uniform(-1, 1, k).astype(np.float32)}
    xn = (t["x"] - t["x"].mean(-1, keepdims=True)) / np.sqrt(t["x"].var(-1, keepdims=True)
                                                             + 1e-5)
    want = (xn * t["norm_w"] + t["norm_b"]) @ t["W"].T + t["b"]
    for placement in ("pim", "host"):
        point = family_of(w).default(w, hw) if placement == "pim" else {"placement": "host"}
        kern = build(w, point, hw)
        validate(kern.program, hw)
        assert [getattr(nd, "kind", "") for s in kern.program.streams if s.engine == "host"
                for nd in s.body][0] == "layernorm"
        assert simulate(kern.program, hw).latency_ns >= family_of(w).bound(w, hw)
        np.testing.assert_allclose(kern.run(hw, t), want, atol=2e-2 * np.abs(want).max())


@pytest.mark.parametrize("hw_name", sorted(HW))
@pytest.mark.parametrize("epi", ["softcap", "softcap_argmax"])
def test_softcap_epilogue_caps_the_logits(hw_name: str, epi: str) -> None:
    """``softcap`` gives ``cap * tanh(z / cap)`` of every output; ``softcap_argmax`` also
    appends each row's argmax (of the capped logits: the same as of the raw ones)."""
    hw, n, k = HW[hw_name], 40, 64
    w = Workload.make("gemm", m=2, n=n, k=k, attrs={"epilogue": epi, "cap": 5.0})
    t, z = tensors(Workload.make("gemm", m=2, n=n, k=k))
    want = 5.0 * np.tanh(z / 5.0)
    if epi == "softcap_argmax":
        want = np.concatenate([want, np.argmax(want, -1)[:, None].astype(np.float64)], 1)
    for point in (family_of(w).default(w, hw), {"placement": "host"}):
        kern = build(w, point, hw)
        validate(kern.program, hw)
        np.testing.assert_allclose(kern.run(hw, t), want, rtol=1e-6, atol=1e-6)
    bad = Workload.make("gemv", m=1, n=n, k=k, attrs={"epilogue": epi})
    with pytest.raises(Exception, match="cap > 0"):
        build(bad, None, hw)
