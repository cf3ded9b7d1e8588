"""The host ops the dense architectures' patterns lower to, against torch: GELU (erf and
tanh), gated activations, soft-capping, partial and interleaved rotary, per-head
LayerNorm."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from sim.host_ops import run
from sim.isa import BufRef, HostOp, aff

RNG = np.random.default_rng(0)


def _op(kind: str, shapes: list[tuple[int, ...]], out: tuple[int, ...], **attrs) -> HostOp:
    ins = tuple(BufRef(f"i{k}", aff(0), s) for k, s in enumerate(shapes))
    return HostOp(kind, (BufRef("y", aff(0), out),), ins, tuple(attrs.items()))


@pytest.mark.parametrize("kind, approx", [("gelu_erf", "none"), ("gelu_tanh", "tanh")])
def test_gelu_matches_torch(kind: str, approx: str) -> None:
    x = RNG.normal(0, 3, (4, 33)).astype(np.float32)
    want = torch.nn.functional.gelu(torch.from_numpy(x), approximate=approx).numpy()
    np.testing.assert_allclose(run(_op(kind, [x.shape], x.shape), [x]), want, atol=2e-6)
    up = RNG.normal(size=x.shape).astype(np.float32)
    got = run(_op(f"{kind}_mul", [x.shape, x.shape], x.shape), [x, up])
    np.testing.assert_allclose(got, want * up, rtol=1e-5, atol=1e-5)


def test_gated_epilogue_halves_the_gemv_output() -> None:
    z = RNG.normal(size=(2, 16)).astype(np.float32)
    op = _op("copy", [z.shape], (2, 8), epi="gelu_tanh_mul")
    gate = torch.from_numpy(z[:, :8])
    want = torch.nn.functional.gelu(gate, approximate="tanh").numpy() * z[:, 8:]
    np.testing.assert_allclose(run(op, [z]), want, rtol=1e-5, atol=1e-6)


def test_softcap_matches_gemma() -> None:
    x = RNG.normal(0, 40, (1, 50)).astype(np.float32)
    want = (torch.tanh(torch.from_numpy(x) / 30.0) * 30.0).numpy()
    np.testing.assert_allclose(run(_op("softcap", [x.shape], x.shape, cap=30.0), [x]), want,
                               rtol=1e-5, atol=1e-5)


def _rotate_pairs(x: torch.Tensor) -> torch.Tensor:
    return torch.stack((-x[..., 1::2], x[..., ::2]), dim=-1).flatten(-2)


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


@pytest.mark.parametrize("pairs", ["half", "interleaved"])
def test_partial_rotary_matches_torch(pairs: str) -> None:
    m, h, d, r = 3, 4, 16, 8  # the first 8 columns of each head rotate
    x = RNG.normal(size=(m, h, d)).astype(np.float32)
    ang = RNG.uniform(0, 6, (m, r)).astype(np.float32)
    cos, sin = np.cos(ang), np.sin(ang)
    t = torch.from_numpy(x)
    rot = (_rotate_pairs if pairs == "interleaved" else _rotate_half)(t[..., :r])
    c, s = torch.from_numpy(cos)[:, None], torch.from_numpy(sin)[:, None]
    want = torch.cat((t[..., :r] * c + rot * s, t[..., r:]), dim=-1).numpy()
    op = _op("rope", [(m, h, d), (m, 1, r), (m, 1, r)], (m, h, d), pairs=pairs)
    np.testing.assert_allclose(run(op, [x, cos[:, None], sin[:, None]]), want, atol=1e-6)


def test_per_head_layernorm_matches_cohere() -> None:
    tokens, heads, d = 2, 3, 8
    x = RNG.normal(size=(tokens * heads, d)).astype(np.float32)
    w = RNG.normal(size=(heads, d)).astype(np.float32)
    ln = torch.nn.functional.layer_norm(torch.from_numpy(x).reshape(tokens, heads, d), (d,),
                                        eps=1e-5)
    want = (ln * torch.from_numpy(w)).reshape(tokens * heads, d).numpy()
    op = _op("layernorm", [x.shape, (heads * d,), (heads * d,)], x.shape, eps=1e-5, heads=heads)
    got = run(op, [x, w.reshape(-1), np.zeros(heads * d, np.float32)])
    np.testing.assert_allclose(got, want, atol=1e-5)
