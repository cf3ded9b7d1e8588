"""Attention lowering: numerics against numpy, cache persistence, bounds, on both presets.

Tolerance from the arithmetic: q, k, v and the probabilities are rounded to the bank dtype
(unit roundoff ``u_in``), score sums and p v sums accumulate in ``accum_dtype`` (``u_acc``)
over d and l terms. With unit-normal data the scaled scores have unit spread, so an error
of about ``3 u_in + u_acc (sqrt(d) + sqrt(ctx))`` in a score or a probability-weighted sum,
times the largest |v|, with a factor 6 of headroom for the tails.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autosched.codegen.registry import build, lowering_for
from search_spaces import Workload
from sim.bound import bound
from sim.errors import AutoschedError
from sim.functional import DeviceMemory
from sim.hwio import load_hardware
from sim.timing import simulate

HW = {n: load_hardware(n) for n in ("hbm-pim", "aim-gddr6")}
EPS = {"fp16": 2.0**-11, "bf16": 2.0**-8, "fp32": 2.0**-24}


def workload(b: int, q: int, h: int, kvh: int, d: int, ctx: int, cap: int) -> Workload:
    return Workload.make("attention", attrs={"capacity": cap}, b=b, q=q, h=h, kvh=kvh, d=d, l=ctx)


def reference(q: np.ndarray, kc: np.ndarray, vc: np.ndarray, nq: int, ctx: int) -> np.ndarray:
    """Causal GQA attention of q [b*nq, h*d] at positions ctx-nq.. over caches [b, kvh, ctx, d]."""
    b, kvh, _, d = kc.shape
    h = q.shape[1] // d
    qq = q.reshape(b, nq, kvh, h // kvh, d)
    s = np.einsum("bikjd,bkpd->bikjp", qq, kc[:, :, :ctx]) / math.sqrt(d)
    vis = np.arange(ctx)[None, :] <= (ctx - nq + np.arange(nq))[:, None]
    s = np.where(vis[None, :, None, None, :], s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    return np.einsum("bikjp,bkpd->bikjd", p, vc[:, :, :ctx]).reshape(b * nq, h * d)


def tokens(c: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """Cache slice [b, kvh, lo:hi, d] as the kernel's k/v input [b*(hi-lo), kvh*d]."""
    b, kvh, _, d = c.shape
    return c[:, :, lo:hi].transpose(0, 2, 1, 3).reshape(b * (hi - lo), kvh * d)


def tolerance(hw, d: int, ctx: int, vmax: float) -> float:
    u_in, u_acc = EPS[hw.pim.dtype], EPS[hw.pim.accum_dtype]
    return 6 * vmax * (3 * u_in + u_acc * (math.sqrt(d) + math.sqrt(ctx)))


def step(hw, mem, point, dims, nq: int, ctx: int, kc, vc, rng) -> np.ndarray:
    """Run one kernel writing positions ctx-nq..ctx-1 and check it against the reference."""
    b, h, kvh, d, cap = dims
    w = workload(b, nq, h, kvh, d, ctx, cap)
    kern = build(w, point, hw)
    q = rng.standard_normal((b * nq, h * d)).astype(np.float32)
    new = {"q": q, "k": tokens(kc, ctx - nq, ctx), "v": tokens(vc, ctx - nq, ctx)}
    y = kern.run(hw, new, mem=mem)
    want = reference(q, kc, vc, nq, ctx)
    assert y.shape == want.shape
    np.testing.assert_allclose(y, want, atol=tolerance(hw, d, ctx, np.abs(vc).max()), rtol=0)
    return kern


def check_point(hw, dims, nq: int, ctx: int, point: dict, seed: int = 0) -> None:
    """Fill the cache by a prefill of ctx-nq tokens, then run the step; time it too."""
    b, h, kvh, d, cap = dims
    rng = np.random.default_rng(seed)
    kc, vc = (rng.standard_normal((b, kvh, cap, d)).astype(np.float32) for _ in range(2))
    mem = DeviceMemory(hw)
    if ctx > nq:  # same cache layout; query-row grouping is the only q-dependent choice
        fill = {k: (1 if k in ("k_qrows", "v_qrows") else v) for k, v in point.items()}
        step(hw, mem, fill, dims, ctx - nq, ctx - nq, kc, vc, rng)
    kern = step(hw, mem, point, dims, nq, ctx, kc, vc, rng)
    lat = simulate(kern.program, hw).latency_ns
    assert lat >= bound(kern.program, hw).ns
    w = workload(b, nq, h, kvh, d, ctx, cap)
    assert lat >= lowering_for(w).bound(w, hw)


SHAPE = st.tuples(
    st.sampled_from(sorted(HW)), st.sampled_from([1, 2]), st.sampled_from([1, 2, 4, 8]),
    st.sampled_from([32, 64, 128]), st.sampled_from([1, 7, 97, 250]), st.sampled_from([1, 3]),
    st.integers(0, 2**16),
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(SHAPE)
def test_sampled_points_match_numpy(case) -> None:
    name, b, g, d, ctx, nq, seed = case
    hw, kvh = HW[name], 2 if g < 8 else 1
    nq = min(nq, ctx)
    w = workload(b, nq, g * kvh, kvh, d, ctx, 256)
    space = lowering_for(w).space(w, hw)
    point = space.sample(np.random.default_rng(seed), 1)[0]
    check_point(hw, (b, g * kvh, kvh, d, 256), nq, ctx, point, seed)


@pytest.mark.parametrize("name", sorted(HW))
@pytest.mark.parametrize("nq", [1, 5])
def test_default_point_decode_and_prefill(name: str, nq: int) -> None:
    hw = HW[name]
    w = workload(2, nq, 8, 2, 64, 40, 64)
    check_point(hw, (2, 8, 2, 64, 64), nq, 40, lowering_for(w).default(w, hw))


@pytest.mark.parametrize("name", sorted(HW))
@pytest.mark.parametrize("point", [
    {"scores": "host", "wsum": "host"}, {"scores": "host", "wsum": "pim", "v_qrows": 1},
    {"scores": "pim", "k_mode": "lane", "k_regs": 2, "k_qrows": 2, "wsum": "host"},
])
def test_host_placements(name: str, point: dict) -> None:
    point = {"kv_channels": 2, "seq_split": 2, **point}
    check_point(HW[name], (1, 4, 2, 32, 128), 1, 97, point)


@pytest.mark.parametrize("name", sorted(HW))
def test_cache_written_at_step_t_is_read_at_step_t_plus_1(name: str) -> None:
    hw, dims = HW[name], (1, 4, 1, 32, 64)
    w = workload(1, 1, 4, 1, 32, 1, 64)
    point = lowering_for(w).default(w, hw)
    rng = np.random.default_rng(3)
    kc, vc = (rng.standard_normal((1, 1, 64, 32)).astype(np.float32) for _ in range(2))
    mem = DeviceMemory(hw)
    for ctx in range(1, 20):  # every decoding step writes one position, reads all before it
        step(hw, mem, point, dims, 1, ctx, kc, vc, rng)


def test_cache_beyond_capacity_is_rejected() -> None:
    hw = HW["hbm-pim"]
    w = workload(1, 1, 4, 1, 32, 65, 64)
    with pytest.raises(AutoschedError, match="capacity"):
        lowering_for(w).space(w, hw)


def test_masked_softmax_host_op() -> None:
    from sim.host_ops import run
    from sim.isa import BufRef, HostOp

    x = np.arange(12, dtype=np.float32).reshape(2, 2, 3)  # [query, head, position]
    op = HostOp("masked_softmax", (BufRef("o", 0, (2, 2, 3)),), (BufRef("x", 0, (2, 2, 3)),),
                (("limit", 3), ("causal", 2), ("group", 2)))
    y = run(op, [x])
    np.testing.assert_array_equal(y[0, :, 2], 0)  # query 0 sees positions 0..1
    np.testing.assert_allclose(y[0].sum(-1), 1, rtol=1e-6)
    e = np.exp(x[1] - x[1].max(-1, keepdims=True))
    np.testing.assert_allclose(y[1], e / e.sum(-1, keepdims=True), rtol=1e-6)
