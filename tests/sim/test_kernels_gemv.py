"""GEMV kernels against numpy, on both presets, for every lowering option.

Exactness tests use integer data: x, W in {-1, 0, 1}. Every product and every partial
sum is then an integer of magnitude <= k, exactly representable in bf16/fp16 inputs and
in fp16 accumulators while |partial sum| <= 2048 (fp16 has an 11-bit significand) and in
fp32 accumulators up to 2^24; the guard below checks the 2048 bound on the data. No
rounding can happen, so any mismatch is a layout or addressing bug: compare exactly.
"""

from __future__ import annotations

import numpy as np
import pytest

from sim.errors import AutoschedError
from sim.hwio import load_hardware
from sim.isa import HostOp
from sim.kernels import Epilogue, GemvOpts, gemv

HW = {name: load_hardware(name) for name in ("hbm-pim", "aim-gddr6")}


def int_data(n: int, k: int, batch: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.integers(-1, 2, (batch, k)).astype(np.float32)
    w = rng.integers(-1, 2, (n, k)).astype(np.float32)
    prefix = np.abs(np.cumsum(x[:, None, :] * w[None, :, :], axis=-1)).max()
    assert prefix <= 2048, "test data would round in fp16: pick another seed"
    return x, w


def check_exact(hw, n: int, k: int, batch: int, opts: GemvOpts | None = None) -> None:
    x, w = int_data(n, k, batch)
    y = gemv(hw, n, k, batch, opts).run(hw, {"x": x, "W": w})
    assert y.shape == (batch, n)
    np.testing.assert_array_equal(y, x @ w.T)


SHAPES = [(16, 16, 1), (97, 250, 2), (250, 97, 3), (128, 4096, 1), (11008, 64, 1), (61, 37, 4)]


@pytest.mark.parametrize("hw", HW.values(), ids=HW.keys())
@pytest.mark.parametrize("n,k,batch", SHAPES)
def test_default_opts_exact(hw, n, k, batch):
    check_exact(hw, n, k, batch)


OPTS = {
    "hbm-pim": [
        GemvOpts(k_split=2),
        GemvOpts(k_split=64),  # pure reduction split
        GemvOpts(channels=8, k_split=4, registers=2),
        GemvOpts(mode="lane"),
        GemvOpts(mode="lane", k_split=2, channels=4),
        GemvOpts(interleave=True),
        GemvOpts(double_buffer=True),
        GemvOpts(double_buffer=True, interleave=True, gb_tile=64),
        GemvOpts(interleave=True, row_prefetch=True),  # the pipelined row walk
        GemvOpts(double_buffer=True, interleave=True, row_prefetch=True, gb_tile=64),
        GemvOpts(interleave=True, row_prefetch=True, registers=2, channels=2, k_split=2),
        GemvOpts(batch_rows=2),
        GemvOpts(loop_order="tile_outer", channels=2, registers=1),
        GemvOpts(gb_tile=32, registers=2, channels=3),
        GemvOpts(gb_tile=16, registers=2, channels=2),  # two segments share a row
    ],
    "aim-gddr6": [
        GemvOpts(mode="bcast"),
        GemvOpts(mode="lane", k_split=4),
        GemvOpts(k_split=8, channels=16),
        GemvOpts(gb_tile=256, batch_rows=2, double_buffer=True),
        GemvOpts(gb_tile=64, channels=3),
        GemvOpts(loop_order="tile_outer", channels=2, registers=2),
        GemvOpts(batch_rows=2, registers=2, channels=1),
    ],
}
CASES = [(name, o) for name, opts in OPTS.items() for o in opts]


@pytest.mark.parametrize("name,opts", CASES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CASES)])
@pytest.mark.parametrize("n,k,batch", [(97, 250, 2), (250, 97, 3)])
def test_every_option_exact(name, opts, n, k, batch):
    check_exact(HW[name], n, k, batch, opts)


def test_batch_four_with_weight_reuse():
    hw = HW["aim-gddr6"]
    check_exact(hw, 40, 300, 4, GemvOpts(batch_rows=4, channels=4))
    check_exact(hw, 40, 300, 4, GemvOpts(batch_rows=3, channels=4))  # batch padded to 6


def test_hbm_fp16_accumulation_within_derived_tolerance():
    """Random data on hbm-pim: the fp16 accumulator rounds after every column step.

    Inputs are rounded to fp16 first (the reference uses the rounded values), products of
    fp16 values are exact in float32, and step j rounds the running sum s_j to nearest
    fp16: an error uniform in at most [-u|s_j|, u|s_j|], u = 2^-11, standard deviation at
    most u|s_j|/sqrt(3). Summed independently over the k steps of each slice (ascending
    k, which is the order the layout feeds one accumulator lane), the error's standard
    deviation is at most u * sqrt(sum_j s_j^2 / 3); we allow 6 of those per output. A
    single misplaced weight column changes an output by |x_j w_ij| ~ 0.5, far beyond it.
    """
    from sim.functional import round_to

    hw, n, k = HW["hbm-pim"], 128, 4096
    rng = np.random.default_rng(1)
    x = round_to(rng.uniform(-1, 1, (1, k)).astype(np.float32), "fp16")
    w = round_to(rng.uniform(-1, 1, (n, k)).astype(np.float32), "fp16")
    y = gemv(hw, n, k, 1).run(hw, {"x": x, "W": w})
    ref = x.astype(np.float64) @ w.astype(np.float64).T
    s = np.cumsum(x[0].astype(np.float64) * w.astype(np.float64), axis=1)
    tol = 6 * 2.0**-11 * np.sqrt((s**2).sum(axis=1) / 3)
    err = np.abs(y[0] - ref[0])
    assert (err <= tol).all(), f"max err/tol {np.max(err / tol):.3f}"
    assert err.max() > 0  # fp16 accumulation does round: the test is not vacuous


def test_aim_fp32_accumulation_within_derived_tolerance():
    """Random data on aim-gddr6: bf16 inputs, fp32 accumulation.

    With the reference on the bf16-rounded inputs, input rounding (relative 2^-8 per
    element) drops out; bf16 products are exact in fp32, and any order of summing k
    terms in fp32 errs by at most gamma_k * sum|p_j| <= 1.01 * k * 2^-24 * sum|p_j|.
    """
    from sim.functional import round_to

    hw, n, k = HW["aim-gddr6"], 256, 4096
    rng = np.random.default_rng(2)
    x = round_to(rng.standard_normal((2, k)).astype(np.float32), "bf16")
    w = round_to(rng.standard_normal((n, k)).astype(np.float32), "bf16")
    for opts in (None, GemvOpts(k_split=4), GemvOpts(mode="lane")):
        y = gemv(hw, n, k, 2, opts).run(hw, {"x": x, "W": w})
        ref = x.astype(np.float64) @ w.astype(np.float64).T
        tol = 1.01 * k * 2.0**-24 * (np.abs(x).astype(np.float64) @ np.abs(w).T)
        assert (np.abs(y - ref) <= tol).all()


@pytest.mark.parametrize("name,opts,reason", [
    ("hbm-pim", GemvOpts(mode="dot"), "adder tree"),
    ("hbm-pim", GemvOpts(gb_tile=256), "exceeds the global buffer"),
    ("hbm-pim", GemvOpts(gb_tile=128, double_buffer=True), "double buffer"),
    ("hbm-pim", GemvOpts(registers=9), "registers live"),
    ("hbm-pim", GemvOpts(loop_order="tile_outer", registers=1, channels=1), "passes"),
    ("hbm-pim", GemvOpts(k_split=3), "divide channels"),
    ("hbm-pim", GemvOpts(batch_rows=3), "batch_rows"),
    ("hbm-pim", GemvOpts(gb_tile=48), "multiple or divisor"),
    ("hbm-pim", GemvOpts(channels=65), "channels 65"),
    ("hbm-pim", GemvOpts(loop_order="diagonal"), "loop_order"),
    ("aim-gddr6", GemvOpts(interleave=True), "bank-pair"),
    ("aim-gddr6", GemvOpts(gb_tile=24), "multiple of the 16 lanes"),
])
def test_validate_gives_reasons(name, opts, reason):
    hw = HW[name]
    why = opts.validate(hw, 4096, 4096, 2)
    assert any(reason in r for r in why), why
    with pytest.raises(AutoschedError, match=reason):
        gemv(hw, 4096, 4096, 2, opts)


def test_default_opts_validate_clean():
    for hw in HW.values():
        for n, k, batch in SHAPES:
            assert GemvOpts().validate(hw, n, k, batch) == []


def test_rejects_non_positive_shape():
    with pytest.raises(AutoschedError, match="positive"):
        gemv(HW["hbm-pim"], 0, 16)


@pytest.mark.parametrize("name,opts", [("hbm-pim", GemvOpts(k_split=2)),
                                       ("aim-gddr6", GemvOpts(mode="lane", batch_rows=2))])
@pytest.mark.parametrize("epilogue", [(), ("add",), ("bias", "add", "silu_mul"), ("silu_mul",)])
def test_one_host_op_finishes_with_the_epilogue(name, opts, epilogue):
    """Lanes, slices, padding and the epilogue are one host op: exact against numpy."""
    hw, n, k, batch = HW[name], 98, 250, 3
    x, w = int_data(n, k, batch)
    rng = np.random.default_rng(1)
    b, r = rng.integers(-4, 5, n).astype(np.float32), rng.integers(-4, 5, (batch, n)).astype(
        np.float32)
    kern = gemv(hw, n, k, batch, opts, epilogue=Epilogue(epilogue))
    hosts = [nd for s in kern.program.streams if s.engine == "host" for nd in s.body
             if isinstance(nd, HostOp)]
    assert [h.kind for h in hosts] == ["gemv_out"]
    assert kern.inputs == ("x", *(("b",) if "bias" in epilogue else ()),
                           *(("r",) if "add" in epilogue else ()))
    feed = {"x": x, "W": w, "b": b, "r": r}
    y = kern.run(hw, {i: feed[i] for i in (*kern.inputs, "W")})
    want = x @ w.T + (b if "bias" in epilogue else 0) + (r if "add" in epilogue else 0)
    if "silu_mul" in epilogue:
        h = n // 2
        want = want[:, :h] / (1 + np.exp(-want[:, :h])) * want[:, h:]
    assert y.shape == kern.output_shape == want.shape
    np.testing.assert_allclose(y, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("name", ["hbm-pim", "aim-gddr6"])
def test_norm_and_rope_epilogues_in_the_finishing_op(name):
    """``rmsnorm_cat`` writes the residual and its norm side by side; ``rope`` rotates the
    first heads of each row in place: both in the one ``gemv_out``, against numpy."""
    hw, n, k, batch, d, heads = HW[name], 96, 130, 2, 16, 4
    x, w = int_data(n, k, batch, seed=2)
    rng = np.random.default_rng(3)
    r, nw = rng.normal(size=(batch, n)).astype(np.float32), rng.normal(size=n).astype(np.float32)
    z = x @ w.T + r
    kern = gemv(hw, n, k, batch, epilogue=Epilogue(("add", "rmsnorm_cat"), eps=1e-6))
    assert kern.inputs == ("x", "r", "out_norm_w") and kern.output_shape == (batch, 2 * n)
    y = kern.run(hw, {"x": x, "W": w, "r": r, "out_norm_w": nw})
    norm = z / np.sqrt(np.mean(z * z, axis=1, keepdims=True) + 1e-6) * nw
    np.testing.assert_allclose(y, np.concatenate([z, norm], axis=1), rtol=1e-5, atol=1e-5)

    ang = rng.uniform(0, 6.3, (batch, d // 2))
    cos, sin = (np.concatenate([f(ang)] * 2, axis=1).astype(np.float32) for f in (np.cos, np.sin))
    kern = gemv(hw, n, k, batch, epilogue=Epilogue(("rope",), rope_heads=heads, rope_dim=d))
    y = kern.run(hw, {"x": x, "W": w, "cos": cos, "sin": sin})
    z = (x @ w.T).reshape(batch, n // d, d)
    rot = np.concatenate([-z[..., d // 2:], z[..., : d // 2]], axis=-1)
    want = z.copy()
    want[:, :heads] = z[:, :heads] * cos[:, None] + rot[:, :heads] * sin[:, None]
    np.testing.assert_allclose(y, want.reshape(batch, n), rtol=1e-5, atol=1e-5)
    with pytest.raises(AutoschedError, match="rope_heads"):
        Epilogue(("rope",))


def test_layernorm_epilogue_appends_the_sums_layernorm():
    """``layernorm_cat`` writes the residual sum and its LayerNorm (scale and shift) side by
    side in the finishing op (StableLM, StarCoder2, OLMo)."""
    hw, n, k, batch = HW["aim-gddr6"], 96, 130, 2
    x, w = int_data(n, k, batch, seed=7)
    rng = np.random.default_rng(8)
    r, nw, nb = (rng.normal(size=s).astype(np.float32) for s in ((batch, n), n, n))
    kern = gemv(hw, n, k, batch, epilogue=Epilogue(("add", "layernorm_cat"), eps=1e-5))
    assert kern.inputs == ("x", "r", "out_norm_w", "out_norm_b")
    y = kern.run(hw, {"x": x, "W": w, "r": r, "out_norm_w": nw, "out_norm_b": nb})
    z = x @ w.T + r
    mu, var = z.mean(axis=1, keepdims=True), z.var(axis=1, keepdims=True)
    want = np.concatenate([z, (z - mu) / np.sqrt(var + 1e-5) * nw + nb], axis=1)
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("pairs", ["half", "interleaved"])
def test_partial_rope_epilogue_rotates_the_first_columns_of_each_head(pairs):
    """With ``rope_rot`` < ``rope_dim`` only the first columns of each rotated head turn
    (Phi, GPT-NeoX, GLM), in halves or neighbouring pairs; the rest of each head and the
    heads after ``rope_heads`` pass unchanged."""
    hw, n, k, batch, d, rot, heads = HW["aim-gddr6"], 96, 64, 2, 16, 6, 4
    x, w = int_data(n, k, batch, seed=5)
    rng = np.random.default_rng(6)
    cos, sin = (rng.uniform(-1, 1, (batch, rot)).astype(np.float32) for _ in range(2))
    epi = Epilogue(("rope",), rope_heads=heads, rope_dim=d, rope_rot=rot, rope_pairs=pairs)
    kern = gemv(hw, n, k, batch, epilogue=epi)
    assert [s.shape for s in map(np.empty, epi.shapes(batch, n))] == [(batch, rot)] * 2
    y = kern.run(hw, {"x": x, "W": w, "cos": cos, "sin": sin}).reshape(batch, n // d, d)
    z = (x @ w.T).reshape(batch, n // d, d)
    part = z[:, :heads, :rot]
    if pairs == "half":
        turned = np.concatenate([-part[..., rot // 2:], part[..., : rot // 2]], axis=-1)
    else:
        turned = np.stack([-part[..., 1::2], part[..., 0::2]], axis=-1).reshape(part.shape)
    want = z.copy()
    want[:, :heads, :rot] = part * cos[:, None] + turned * sin[:, None]
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)
    with pytest.raises(AutoschedError, match="even number"):
        Epilogue(("rope",), rope_heads=heads, rope_dim=d, rope_rot=5)


@pytest.mark.parametrize("name", ["hbm-pim", "aim-gddr6"])
def test_argmax_epilogue_appends_the_token_after_the_logits(name):
    """``argmax_cat`` keeps the logits and adds each row's argmax as one more column, in
    the PIM finishing op and in the host multiply over the resident layout alike."""
    from search_spaces.gemv import resident_layout
    from search_spaces.workload import Workload
    from sim.kernels.gemv_host import gemv_host

    hw, n, k, batch = HW[name], 200, 64, 3
    x, w = int_data(n, k, batch, seed=4)
    z = x @ w.T
    want = np.concatenate([z, np.argmax(z, axis=1)[:, None].astype(np.float32)], axis=1)
    epi = Epilogue(("bias", "argmax_cat"))
    b = np.linspace(-1, 1, n).astype(np.float32)
    want_b = np.concatenate([z + b, np.argmax(z + b, axis=1)[:, None]], axis=1)
    layout = resident_layout(Workload.make("gemv", "fp16", m=batch, n=n, k=k), hw)
    for kern in (gemv(hw, n, k, batch, epilogue=epi), gemv_host(hw, n, k, batch, layout,
                                                                epilogue=epi)):
        assert kern.inputs == ("x", "b") and kern.output_shape == (batch, n + 1)
        y = kern.run(hw, {"x": x, "W": w, "b": b})
        np.testing.assert_allclose(y, want_b, rtol=1e-6, atol=1e-6)
    y = gemv(hw, n, k, batch, epilogue=Epilogue(("argmax_cat",))).run(hw, {"x": x, "W": w})
    np.testing.assert_allclose(y, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("name", HW)
@pytest.mark.parametrize("opts,resident", [
    (GemvOpts(registers=1, channels=2), True),
    (GemvOpts(registers=1, channels=2, batch_rows=2), True),
    (GemvOpts(registers=1, channels=2, loop_order="tile_outer"), False),  # already once
    (GemvOpts(registers=1, channels=2, double_buffer=True), False),  # two halves a pass
])
def test_a_one_tile_input_is_broadcast_once_across_the_passes(name, opts, resident):
    """With one tile per pass walked outside the tiles, the input stays in the global
    buffer: each batch group broadcasts it once, not once per output pass; the result is
    unchanged."""
    from sim.isa import WrGb
    from sim.kernels.gemv_layout import gemv_layout_of
    from sim.program import walk

    hw, (n, k, batch) = HW[name], (2000, 64, 3)
    pl = gemv_layout_of(hw, n, k, batch, opts)
    assert pl.P > 1 and pl.resident_input is resident
    check_exact(hw, n, k, batch, opts)
    writes: list[int] = []
    stream = next(s for s in gemv(hw, n, k, batch, opts).program.streams if s.engine == "pim")
    walk(stream.body, lambda ins, m: writes.append(m) if isinstance(ins, WrGb) else None)
    passes = 1 if resident or opts.loop_order == "tile_outer" else pl.P
    per_group = pl.Br * pl.ntiles * passes
    assert sum(writes) == pl.nbg * per_group


def test_per_head_layernorm_epilogue_scales_each_head_on_its_own():
    """``qklnorm`` LayerNorms each rotated head without a shift before the rope (Cohere's
    q/k norms), ``qk_per_head`` taking one scale row per head: q's ``qk_heads`` rows, then
    k's; the heads after ``rope_heads`` (v) pass unchanged."""
    hw, n, k, batch, d, heads, qh = HW["hbm-pim"], 96, 64, 2, 16, 5, 3
    x, w = int_data(n, k, batch, seed=8)
    rng = np.random.default_rng(9)
    cos, sin = (rng.uniform(-1, 1, (batch, d)).astype(np.float32) for _ in range(2))
    wq = rng.uniform(0.5, 1.5, (qh, d)).astype(np.float32)
    wk = rng.uniform(0.5, 1.5, (heads - qh, d)).astype(np.float32)
    epi = Epilogue(("qklnorm", "rope"), rope_heads=heads, rope_dim=d, qk_heads=qh,
                   qk_eps=1e-5, rope_pairs="interleaved", qk_per_head=True)
    assert epi.shapes(batch, n)[:2] == ((qh * d,), ((heads - qh) * d,))
    y = gemv(hw, n, k, batch, epilogue=epi).run(
        hw, {"x": x, "W": w, "q_norm_w": wq.reshape(-1), "k_norm_w": wk.reshape(-1),
             "cos": cos, "sin": sin}).reshape(batch, n // d, d)
    z = (x @ w.T).reshape(batch, n // d, d)
    part = z[:, :heads]
    mu, var = part.mean(axis=-1, keepdims=True), part.var(axis=-1, keepdims=True)
    normed = (part - mu) / np.sqrt(var + 1e-5) * np.concatenate([wq, wk])
    turned = np.stack([-normed[..., 1::2], normed[..., 0::2]], axis=-1).reshape(normed.shape)
    want = z.copy()
    want[:, :heads] = normed * cos[:, None] + turned * sin[:, None]
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4)
    with pytest.raises(AutoschedError, match="qklnorm epilogue needs 0 < qk_heads"):
        Epilogue(("qklnorm", "rope"), rope_heads=heads, rope_dim=d, qk_heads=heads)
