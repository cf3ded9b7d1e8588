"""Attention lowering: numerics against numpy, cache persistence, bounds, on both presets,
for any head dim (padded lanes), any GQA ratio, and sliding windows (a ring of slots).

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

from autosched.families.registry import build, family_of
from search_spaces import Workload
from sim.bound import bound
from sim.errors import AutoschedError
from sim.functional import DeviceMemory
from sim.hwio import load_hardware
from sim.program import walk
from sim.timing import simulate

HW = {n: load_hardware(n) for n in ("hbm-pim", "aim-gddr6")}
EPS = {"fp16": 2.0**-11, "bf16": 2.0**-8, "fp32": 2.0**-24}


def workload(b: int, q: int, h: int, kvh: int, d: int, ctx: int, cap: int,
             window: int = 0) -> Workload:
    attrs = {"capacity": cap, **({"window": window} if window else {})}
    return Workload.make("attention", attrs=attrs, b=b, q=q, h=h, kvh=kvh, d=d, l=ctx)


def reference(q: np.ndarray, kc: np.ndarray, vc: np.ndarray, nq: int, ctx: int,
              window: int = 0) -> np.ndarray:
    """Causal GQA attention of q [b*nq, h*d] at positions ctx-nq.. over caches [b, kvh, ctx, d],
    each query seeing its last ``window`` positions (0: all)."""
    b, kvh, _, d = kc.shape
    h = q.shape[1] // d
    qq = q.reshape(b, nq, kvh, h // kvh, d)
    s = np.einsum("bikjd,bkpd->bikjp", qq, kc[:, :, :ctx]) / math.sqrt(d)
    pos, at = ctx - nq + np.arange(nq), np.arange(ctx)[None, :]
    vis = (at <= pos[:, None]) & (at > pos[:, None] - (window or ctx + 1))
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


def one_group(w: Workload, hw, point: dict) -> dict:
    """``point`` with ``v_groups=1`` where ``w``'s space has the parameter and one softmax
    stage where the point leaves them out (the hand-written points here are about other
    parameters)."""
    names = {p.name for p in family_of(w).space(w, hw).params}
    if "v_groups" in names and point.get("wsum") == "pim" and "v_groups" not in point:
        point = {**point, "v_groups": 1}
    if point.get("wsum") == "pim" and "softmax_stages" not in point:
        point = {**point, "softmax_stages": 1}
    return point


def step(hw, mem, point, dims, nq: int, ctx: int, kc, vc, rng, window: int = 0):
    """Run one kernel writing positions ctx-nq..ctx-1 and check it against the reference."""
    b, h, kvh, d, cap = dims
    w = workload(b, nq, h, kvh, d, ctx, cap, window)
    kern = build(w, one_group(w, hw, point), hw)
    q = rng.standard_normal((b * nq, h * d)).astype(np.float32)
    new = {"q": q, "k": tokens(kc, ctx - nq, ctx), "v": tokens(vc, ctx - nq, ctx)}
    y = kern.run(hw, new, mem=mem)
    want = reference(q, kc, vc, nq, ctx, window)
    assert y.shape == want.shape
    seen = min(ctx, window or ctx)
    np.testing.assert_allclose(y, want, atol=tolerance(hw, d, seen, np.abs(vc).max()), rtol=0)
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
    assert lat >= family_of(w).bound(w, hw)


HEAD_DIMS = (16, 32, 64, 128, 6, 48, 80, 96, 100)  # powers of two and padded lanes
CONTEXTS = (1, 7, 97, 250)
# (preset, batch, GQA ratio, head dim, context, new tokens, scores, wsum, k_mode): every
# preset, batch, ratio 1..8, head dim, context and token count at least once, every
# placement pair on each preset, both k modes; the long contexts with PIM MACs on the
# narrow heads, where the prefill that fills the cache runs in seconds
SAMPLED = [
    ("hbm-pim", 1, 1, 16, 250, 1, "pim", "pim", "lane"),
    ("aim-gddr6", 1, 2, 6, 250, 3, "pim", "pim", "dot"),
    ("hbm-pim", 2, 3, 128, 97, 3, "pim", "host", "lane"),
    ("aim-gddr6", 2, 5, 96, 97, 1, "host", "pim", None),
    ("hbm-pim", 1, 8, 32, 7, 3, "pim", "pim", "lane"),
    ("aim-gddr6", 2, 6, 100, 7, 1, "pim", "pim", "lane"),
    ("hbm-pim", 2, 4, 48, 1, 1, "host", "host", None),
    ("aim-gddr6", 1, 7, 80, 7, 3, "pim", "host", "lane"),
    ("hbm-pim", 2, 2, 64, 97, 1, "host", "pim", None),
    ("aim-gddr6", 1, 3, 96, 250, 1, "host", "host", None),
]


def draw(space, seed: int, scores: str, wsum: str, k_mode: str | None) -> dict:
    """The first point of a seeded draw (each parameter uniform) with these placements."""
    rng = np.random.default_rng(seed)
    for _ in range(5000):
        point = space.sample(rng, 1)[0]
        if (point["scores"], point["wsum"], point.get("k_mode")) == (scores, wsum, k_mode):
            return point
    raise AssertionError(f"no {scores}/{wsum}/{k_mode} point in {space}")


def test_sampled_cases_cover_every_dimension() -> None:
    cols = list(zip(*SAMPLED, strict=True))
    for col, values in zip(cols[:6], (HW, (1, 2), range(1, 9), HEAD_DIMS, CONTEXTS, (1, 3)),
                           strict=True):
        assert set(col) == set(values)
    for name in HW:
        assert {(c[6], c[7]) for c in SAMPLED if c[0] == name} == {
            (s, v) for s in ("host", "pim") for v in ("host", "pim")}
    assert set(cols[8]) == {None, "lane", "dot"}


@pytest.mark.parametrize("case", SAMPLED, ids=lambda c: "-".join(map(str, c)))
def test_sampled_points_match_numpy(case: tuple) -> None:
    name, b, g, d, ctx, nq, scores, wsum, k_mode = case
    seed = SAMPLED.index(case)
    hw, kvh = HW[name], 2 if g < 5 else 1
    nq = min(nq, ctx)
    w = workload(b, nq, g * kvh, kvh, d, ctx, 256)
    point = draw(family_of(w).space(w, hw), seed, scores, wsum, k_mode)
    check_point(hw, (b, g * kvh, kvh, d, 256), nq, ctx, point, seed)


@pytest.mark.parametrize("name", sorted(HW))
@pytest.mark.parametrize("nq", [1, 5])
def test_default_point_decode_and_prefill(name: str, nq: int) -> None:
    hw = HW[name]
    w = workload(2, nq, 8, 2, 64, 40, 64)
    check_point(hw, (2, 8, 2, 64, 64), nq, 40, family_of(w).default(w, hw))


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
    point = family_of(w).default(w, hw)
    rng = np.random.default_rng(3)
    kc, vc = (rng.standard_normal((1, 1, 64, 32)).astype(np.float32) for _ in range(2))
    mem = DeviceMemory(hw)
    for ctx in range(1, 20):  # every decoding step writes one position, reads all before it
        step(hw, mem, point, dims, 1, ctx, kc, vc, rng)


@pytest.mark.parametrize("name", sorted(HW))
@pytest.mark.parametrize("d, g, window, cap", [(32, 2, 5, 24), (80, 3, 7, 20), (16, 3, 3, 12)])
def test_sliding_window_ring_beyond_the_window(name: str, d: int, g: int, window: int,
                                               cap: int) -> None:
    """Decoding past the window: slot p % window is overwritten, the last window seen."""
    hw, kvh = HW[name], 2
    dims = (1, g * kvh, kvh, d, cap)
    w = workload(1, 1, g * kvh, kvh, d, 1, cap, window)
    space = family_of(w).space(w, hw)
    rng = np.random.default_rng(d)
    kc, vc = (rng.standard_normal((1, kvh, cap, d)).astype(np.float32) for _ in range(2))
    for point in (family_of(w).default(w, hw), space.sample(np.random.default_rng(1), 1)[0]):
        mem = DeviceMemory(hw)
        for ctx in range(1, cap + 1):
            kern = step(hw, mem, point, dims, 1, ctx, kc, vc, rng, window)
        assert kern.rows == build(workload(1, 1, g * kvh, kvh, d, 1, window), point, hw).rows
        wl = workload(1, 1, g * kvh, kvh, d, cap, cap, window)
        assert simulate(kern.program, hw).latency_ns >= family_of(wl).bound(wl, hw)


@pytest.mark.parametrize("name", sorted(HW))
def test_sliding_window_prefill(name: str) -> None:
    hw, dims = HW[name], (1, 6, 2, 48, 16)
    rng = np.random.default_rng(5)
    kc, vc = (rng.standard_normal((1, 2, 16, 48)).astype(np.float32) for _ in range(2))
    w = workload(1, 16, 6, 2, 48, 16, 16, 5)
    step(hw, DeviceMemory(hw), family_of(w).default(w, hw), dims, 16, 16, kc, vc, rng, 5)


@pytest.mark.parametrize("name", sorted(HW))
@pytest.mark.parametrize("d, window", [(32, 0), (80, 0), (48, 6)])
def test_cache_loaded_from_the_host_is_read_by_the_kernel(name: str, d: int, window: int) -> None:
    """Positions computed elsewhere, written with load_cache, then a decode step."""
    from autosched.families.attention.cache import load_cache
    from search_spaces.attention import attention_layout_of, capacity_of

    hw, cap, ctx = HW[name], 32, 20
    dims = (2, 6, 2, d, cap)
    rng = np.random.default_rng(d)
    kc, vc = (rng.standard_normal((2, 2, cap, d)).astype(np.float32) for _ in range(2))
    w = workload(2, 1, 6, 2, d, ctx, cap, window)
    space = family_of(w).space(w, hw)
    for point in (family_of(w).default(w, hw), space.sample(np.random.default_rng(2), 1)[0]):
        pl = attention_layout_of(w.dims, capacity_of(w), point, hw, window)
        mem = DeviceMemory(hw)
        past = list(range(max(0, ctx - 1 - pl.span), ctx - 1))
        load_cache(pl, mem, 0, kc[:, :, past], vc[:, :, past], past)
        step(hw, mem, point, dims, 1, ctx, kc, vc, rng, window)


def test_cache_beyond_capacity_is_rejected() -> None:
    hw = HW["hbm-pim"]
    w = workload(1, 1, 4, 1, 32, 65, 64)
    with pytest.raises(AutoschedError, match="capacity"):
        family_of(w).space(w, hw)


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
    op = HostOp("masked_softmax", (BufRef("o", 0, (2, 2, 3)),), (BufRef("x", 0, (2, 2, 3)),),
                (("limit", 3), ("causal", 2), ("group", 2), ("window", 1)))
    y = run(op, [x])  # a window of 1: each query sees only its own position
    np.testing.assert_array_equal(y[0, :, 1], 1)
    np.testing.assert_array_equal(y[1, :, 2], 1)


@pytest.mark.parametrize("name", sorted(HW))
@pytest.mark.parametrize("bs, ss, kc", [(2, 2, 1), (4, 1, 2), (4, 2, 2)])
def test_batch_split_deals_sequences_over_channel_groups(name: str, bs: int, ss: int,
                                                         kc: int) -> None:
    """Each batch group's streams hold only its sequences: a prefill then a decode step
    match numpy, and a channel's cache holds ``b / batch_split`` sequences' slots."""
    hw, dims = HW[name], (4, 4, 2, 32, 64)
    base = {"kv_channels": kc, "seq_split": ss, "scores": "pim", "k_mode": "lane", "k_regs": 1,
            "k_qrows": 1, "wsum": "pim", "v_qrows": 1}
    check_point(hw, dims, 1, 50, {**base, "batch_split": bs}, seed=bs)
    w = workload(4, 1, 4, 2, 32, 50, 64)
    whole = build(w, one_group(w, hw, {**base, "batch_split": 1}), hw)
    split = build(w, one_group(w, hw, {**base, "batch_split": bs}), hw)
    assert whole.rows == bs * split.rows
    assert len(split.program.streams) == bs * ss + 1
    used = {c for s in split.program.streams for c in s.channels}
    assert used == set(range(bs * ss * kc))


def test_batch_split_fills_channels_a_short_cache_leaves_idle() -> None:
    """Eight sequences of a cache shorter than one pass: the sequence split has nothing to
    deal, dealing the sequences over channel groups makes the step several times faster,
    and the default takes it."""
    hw = HW["hbm-pim"]
    w = workload(8, 1, 8, 4, 32, 128, 128)
    low = family_of(w)
    default = low.default(w, hw)
    assert default["batch_split"] == 8
    serial = simulate(build(w, {**default, "batch_split": 1}, hw).program, hw).latency_ns
    dealt = simulate(build(w, default, hw).program, hw).latency_ns
    assert dealt * 3 < serial
    assert dealt >= low.bound(w, hw)


@pytest.mark.parametrize("name", sorted(HW))
@pytest.mark.parametrize("d, window", [(32, 0), (80, 0), (48, 5)])
def test_prompt_on_the_host_reads_nothing_back(name: str, d: int, window: int) -> None:
    """A prompt from an empty cache with both products on the host multiplies with its own
    k and v: no bank is read, the result matches numpy, and the cache it stores serves the
    next decoding step (without a window: decoding keeps a window's ring of slots, a
    prompt every position)."""
    hw, cap, n = HW[name], 32, 12
    dims = (2, 6, 2, d, cap)
    point = {"kv_channels": 2, "seq_split": 2, "batch_split": 2, "scores": "host",
             "wsum": "host"}
    w = workload(2, n, 6, 2, d, n, cap, window)
    space = family_of(w).space(w, hw)
    point.update({k: v for k, v in family_of(w).default(w, hw).items()
                  if k in ("head_pad", "v_units")})
    space.check(point)
    rng = np.random.default_rng(d)
    kc, vc = (rng.standard_normal((2, 2, cap, d)).astype(np.float32) for _ in range(2))
    mem = DeviceMemory(hw)
    kern = step(hw, mem, point, dims, n, n, kc, vc, rng, window)
    instrs: set[str] = set()
    for s in kern.program.streams:
        walk(s.body, lambda i, _: instrs.add(type(i).__name__))
    assert "RdBank" not in instrs and "WrBank" in instrs
    assert simulate(kern.program, hw).latency_ns >= family_of(w).bound(w, hw)
    if not window:
        step(hw, mem, point, dims, 1, n + 1, kc, vc, rng)


@pytest.mark.parametrize("name", sorted(HW))
@pytest.mark.parametrize("b, q, h, kvh, d, ctx, window",
                         [(1, 1, 8, 4, 32, 300, 0), (6, 1, 9, 3, 80, 50, 0),
                          (2, 4, 8, 2, 64, 200, 96)])
def test_streams_built_once_and_moved_equal_streams_built_each(
        name: str, b: int, q: int, h: int, kvh: int, d: int, ctx: int, window: int) -> None:
    """The lowering builds the compute part of one stream per pass count and moves it by
    whole chunks and batch groups into the others: stream for stream, the same program as
    building every one."""
    from autosched.families.attention.streams import pim_stream, pim_streams
    from search_spaces.attention import attention_layout_of

    hw, w = HW[name], workload(b, q, h, kvh, d, ctx, 512, window)
    pts = list(family_of(w).space(w, hw).enumerate())
    for i in np.random.default_rng(0).choice(len(pts), 25, replace=False):
        pl = attention_layout_of(w.dims, 512, pts[i], hw, window=window)
        assert pim_streams(pl) == tuple(pim_stream(pl, bj, si)
                                        for bj in range(pl.Bs) for si in range(pl.S))
