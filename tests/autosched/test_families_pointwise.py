"""Point-wise lowerings: every point compiles, validates, simulates above its bound, and
computes what numpy computes."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autosched.families import FAMILIES, build, family_of
from autosched.families.pointwise import POINTWISE
from search_spaces import Workload
from sim.bound import bound as program_bound
from sim.functional import round_to
from sim.hwio import load_hardware
from sim.timing import simulate
from sim.validate import validate

HW = {name: load_hardware(name) for name in ("hbm-pim", "aim-gddr6")}
U32 = 2.0**-24  # float32 unit roundoff: the host computes in float32
UNIT = {"fp16": 2.0**-11, "bf16": 2.0**-8}


def _silu(x: np.ndarray) -> np.ndarray:
    return x / (1.0 + np.exp(-x))


def _ref(wl: Workload, t: dict[str, np.ndarray]) -> np.ndarray:
    """float64 numpy semantics of each family."""
    if wl.op == "rmsnorm":
        x = t["x"]
        return x / np.sqrt(np.mean(x * x, -1, keepdims=True) + wl.attr("eps", 1e-5)) * t["w"]
    if wl.op == "rope":
        x, h = t["x"], wl.dims["d"] // 2
        rot = np.concatenate([-x[..., h:], x[..., :h]], -1)
        return x * t["cos"][:, None, :] + rot * t["sin"][:, None, :]
    if wl.op == "embedding":
        x = t["table"][t["ids"].astype(int)]
        if wl.attr("epilogue") == "rmsnorm":  # rows | their RMS norm
            eps = float(wl.attr("out_eps"))
            norm = x / np.sqrt(np.mean(x * x, -1, keepdims=True) + eps) * t["out_norm_w"]
            x = np.concatenate([x, norm], axis=-1)
        return x
    if wl.op == "argmax":
        return np.argmax(t["x"], -1).astype(np.float64)
    a, b = t["a"], t.get("b")
    return {"add": lambda: a + b, "mul": lambda: a * b, "silu": lambda: _silu(a),
            "silu_mul": lambda: _silu(a) * b}[wl.attr("fn")]()


def _tensors(wl: Workload, rng: np.random.Generator, dtype: str) -> dict[str, np.ndarray]:
    """Inputs exactly representable in the bank ``dtype`` (PIM rounds only its result)."""
    d = wl.dims

    def r(*shape: int) -> np.ndarray:
        return round_to(rng.uniform(-3, 3, shape).astype(np.float32), dtype).astype(np.float64)

    if wl.op == "rmsnorm":
        return {"x": r(d["m"], d["n"]), "w": r(d["n"])}
    if wl.op == "rope":
        ang = rng.uniform(0, 6.3, (d["m"], d["d"]))
        return {"x": r(d["m"], d["h"], d["d"]), "cos": np.cos(ang), "sin": np.sin(ang)}
    if wl.op == "embedding":
        return {"ids": rng.integers(0, d["v"], d["m"]).astype(np.float64),
                "table": r(d["v"], d["n"]), "out_norm_w": r(d["n"])}
    if wl.op == "argmax":
        return {"x": rng.permutation(d["m"] * d["n"]).reshape(d["m"], d["n"]) / 7.0}
    names = ("a", "b") if wl.attr("fn") in ("add", "mul", "silu_mul") else ("a",)
    return {k: r(d["m"], d["n"]) for k in names}


def _tolerance(wl: Workload, point: dict, dtype: str) -> tuple[float, float]:
    """(rtol, atol) from the arithmetic: bank ops round once to the bank dtype; host ops
    are float32 (a mean over n terms for rmsnorm, three terms for rope, exp for silu)."""
    if point["placement"] == "pim":
        return UNIT[dtype], 1e-6
    if wl.op == "rmsnorm" or wl.attr("epilogue") == "rmsnorm":
        return (wl.dims["n"] + 8) * U32, 1e-6
    if wl.op == "rope":
        return 8 * U32, 3 * 8 * U32
    return 16 * U32, 1e-6


def _workloads() -> st.SearchStrategy[Workload]:
    m, n = st.integers(1, 4), st.integers(1, 300)
    ew = st.builds(lambda fn, m, n: Workload.make("elementwise", attrs={"fn": fn}, m=m, n=n),
                   st.sampled_from(["add", "mul", "silu", "silu_mul"]), m, n)
    return st.one_of(
        ew, ew,
        st.builds(lambda m, n, e: Workload.make("rmsnorm", attrs={"eps": e}, m=m, n=n),
                  m, n, st.sampled_from([1e-5, 1e-6])),
        st.builds(lambda m, h, d: Workload.make("rope", m=m, h=h, d=d), m,
                  st.integers(1, 6), st.sampled_from([2, 8, 32])),
        st.builds(lambda m, n, v: Workload.make("embedding", m=m, n=n, v=v), m,
                  st.integers(1, 64), st.integers(1, 100)),
        st.builds(lambda m, n, v, e: Workload.make(
            "embedding", attrs={"epilogue": "rmsnorm", "out_eps": e}, m=m, n=n, v=v), m,
            st.integers(1, 64), st.integers(1, 100), st.sampled_from([1e-5, 1e-6])),
        st.builds(lambda m, n: Workload.make("argmax", m=m, n=n), m, n),
    )


@settings(max_examples=30, deadline=None)
@given(wl=_workloads(), hw_name=st.sampled_from(sorted(HW)), data=st.data())
def test_every_point_compiles_simulates_and_matches_numpy(wl, hw_name, data):
    hw = HW[hw_name]
    low = family_of(wl)
    points = list(low.space(wl, hw).enumerate())
    point = data.draw(st.sampled_from(points))
    kern = build(wl, point, hw)
    validate(kern.program, hw)
    latency = simulate(kern.program, hw).latency_ns
    assert latency >= program_bound(kern.program, hw).ns - 1e-9
    assert latency >= low.bound(wl, hw) - 1e-9
    t = _tensors(wl, np.random.default_rng(wl.dims["m"] * 1000 + sum(wl.dims.values())),
                 hw.pim.dtype)
    got = kern.run(hw, t)
    ref = _ref(wl, t)
    assert got.shape == ref.shape
    rtol, atol = _tolerance(wl, point, hw.pim.dtype)
    np.testing.assert_allclose(got, ref, rtol=rtol, atol=atol * max(1.0, np.abs(ref).max()))


@pytest.mark.parametrize("hw", HW.values(), ids=HW.keys())
@pytest.mark.parametrize("m", [1, 3])
def test_pim_add_uses_the_banks_and_keeps_the_family_names(hw, m):
    wl = Workload.make("elementwise", attrs={"fn": "add"}, m=m, n=40)
    kern = build(wl, {"placement": "pim"}, hw)
    assert kern.inputs == ("a", "b") and kern.output == "y" and kern.output_shape == (m, 40)
    assert any(s.engine == "pim" for s in kern.program.streams)
    host = next(s for s in kern.program.streams if s.engine == "host")
    staged = any(getattr(n, "token", None) == "start" for n in host.body)
    assert staged == (m > 1)  # several rows: the host stages the operands first


def test_host_placement_is_one_host_op():
    hw = HW["hbm-pim"]
    for wl in (Workload.make("rmsnorm", m=2, n=8), Workload.make("rope", m=2, h=3, d=4),
               Workload.make("embedding", m=2, n=8, v=9), Workload.make("argmax", m=1, n=5),
               Workload.make("embedding", attrs={"epilogue": "rmsnorm"}, m=2, n=8, v=9),
               Workload.make("elementwise", attrs={"fn": "silu"}, m=2, n=5)):
        kern = build(wl, None, hw)
        (stream,) = kern.program.streams
        assert stream.engine == "host" and len(stream.body) == 1
        assert family_of(wl).tensors(wl) == ()


def test_bound_is_min_over_placements_and_host_wins_small_adds():
    hw = HW["hbm-pim"]
    wl = Workload.make("elementwise", attrs={"fn": "add"}, m=1, n=256)
    low = family_of(wl)
    host = program_bound(build(wl, {"placement": "host"}, hw).program, hw).ns
    pim = program_bound(build(wl, {"placement": "pim"}, hw).program, hw).ns
    assert low.bound(wl, hw) == pytest.approx(min(host, pim))
    # one host op: dispatch overhead plus 3 x 256 x 4 bytes at the host bandwidth
    assert host == pytest.approx(hw.host.op_overhead_ns + 3 * 256 * 4 / hw.host.bandwidth_gbps)


def test_all_families_registered():
    for fam in ("rmsnorm", "rope", "elementwise", "embedding", "argmax", "extern"):
        assert FAMILIES[fam] in POINTWISE and fam in FAMILIES[fam].ops


def test_an_embedding_epilogue_other_than_a_norm_is_refused():
    from search_spaces.errors import SpaceError

    wl = Workload.make("embedding", attrs={"epilogue": "add"}, m=1, n=8, v=9)
    with pytest.raises(SpaceError, match="epilogue is rmsnorm, layernorm or none"):
        family_of(wl).space(wl, HW["hbm-pim"])
