"""Our torch decoder: KV-cache consistency, seeding, tying, bias, and the custom kernels."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from autosched.frontend import (
    ModelConfig,
    ModelError,
    build_model,
    empty_cache,
    get_model_config,
)
from autosched.frontend.kernels import attention, rmsnorm, rope

TINY = get_model_config("llama-tiny")
QWEN = ModelConfig("qwen2", hidden=96, intermediate=160, layers=2, heads=6, kv_heads=2,
                   head_dim=16, vocab=300, max_positions=64, tie_embeddings=True,
                   attention_bias=True, name="qwen-toy")


def _ids(b: int, s: int, vocab: int, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, vocab, (b, s), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("cfg", [TINY, QWEN], ids=lambda c: c.name)
def test_decode_with_cache_equals_full_forward(cfg: ModelConfig) -> None:
    m = build_model(cfg, seed=3, dtype=torch.float32)
    ids = _ids(2, 9, cfg.vocab)
    kc, vc = empty_cache(cfg, 2, 12, dtype=torch.float32)
    with torch.no_grad():
        full, fk, fv = m(ids, 0, kc, vc)
        logits, k, v = m(ids[:, :5], 0, kc, vc)
        steps = [logits]
        for p in range(5, 9):
            logits, k, v = m(ids[:, p:p + 1], torch.tensor([p]), k, v)
            steps.append(logits)
    assert full.shape == (2, 9, cfg.vocab)
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(k, fk, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(v, fv, atol=1e-5, rtol=1e-4)
    assert torch.count_nonzero(k[:, :, :, 9:]) == 0  # slots past the tokens stay empty


def test_logits_last_is_the_last_row() -> None:
    m = build_model(TINY, dtype=torch.float32)
    kc, vc = empty_cache(TINY, 1, 8, dtype=torch.float32)
    with torch.no_grad():
        full, _, _ = m(_ids(1, 6, TINY.vocab), 0, kc, vc)
        last, _, _ = m(_ids(1, 6, TINY.vocab), 0, kc, vc, logits_last=True)
    torch.testing.assert_close(last, full[:, -1:])


def test_seed_determines_weights() -> None:
    a, b, c = (build_model(TINY, seed=s) for s in (7, 7, 8))
    sa, sb, sc = a.state_dict(), b.state_dict(), c.state_dict()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert not torch.equal(sa["layers.0.attn.q_proj.weight"], sc["layers.0.attn.q_proj.weight"])
    w = sa["layers.1.mlp.down_proj.weight"].float()
    assert abs(w.std().item() - 0.02) < 0.002
    assert torch.all(sa["layers.0.attn.attn_norm.weight"] == 1)


def test_fp16_activations_stay_finite_and_close_to_fp32() -> None:
    ids = _ids(1, 16, TINY.vocab)
    out = []
    for dt in (torch.float16, torch.float32):
        kc, vc = empty_cache(TINY, 1, 16, dtype=dt)
        with torch.no_grad():
            out.append(build_model(TINY, seed=1, dtype=dt)(ids, 0, kc, vc)[0].float())
    assert out[0].dtype == torch.float32 and torch.isfinite(out[0]).all()
    torch.testing.assert_close(out[0], out[1], atol=2e-2, rtol=2e-2)


def test_tied_embeddings_and_bias() -> None:
    m = build_model(QWEN)
    assert m.lm_head.weight is m.embed.weight
    assert m.layers[0].attn.q_proj.bias is not None and m.layers[0].attn.o_proj.bias is None
    untied = build_model(dataclasses.replace(QWEN, tie_embeddings=False))
    assert untied.lm_head.weight is not untied.embed.weight
    assert build_model(TINY).layers[0].attn.k_proj.bias is None


def test_meta_build_allocates_nothing() -> None:
    m = build_model(get_model_config("llama3-8b"), device="meta")
    assert all(p.device.type == "meta" for p in m.parameters())
    assert m.embed.weight.dtype == torch.bfloat16
    with pytest.raises(ModelError, match="device"):
        build_model(TINY, device="cuda")


def test_rmsnorm_kernel() -> None:
    x = torch.randn(3, 5, 64)
    w = torch.rand(64)
    ref = x / torch.sqrt((x * x).mean(-1, keepdim=True) + 1e-5) * w
    torch.testing.assert_close(rmsnorm(x, w, 1e-5), ref)


def test_rope_kernel_rotates_pairs_by_position_angle() -> None:
    q, k = torch.randn(1, 3, 2, 8), torch.randn(1, 3, 1, 8)
    rq, rk = rope(q, k, torch.tensor([0, 1, 5]), 100.0)
    torch.testing.assert_close(rq[:, 0], q[:, 0])  # position 0 is the identity
    i, p = 1, 5  # pair (i, i + d/2) at position p rotates by p * theta^(-2i/d)
    ang = torch.tensor(p * 100.0 ** (-2 * i / 8))
    x0, x1 = k[0, 2, 0, i], k[0, 2, 0, i + 4]
    torch.testing.assert_close(rk[0, 2, 0, i], x0 * ang.cos() - x1 * ang.sin())
    torch.testing.assert_close(rk[0, 2, 0, i + 4], x1 * ang.cos() + x0 * ang.sin())
    torch.testing.assert_close(rq.norm(dim=-1), q.norm(dim=-1))


def test_attention_kernel_gqa_and_mask() -> None:
    b, s, h, kvh, d, length = 2, 2, 4, 2, 8, 6
    q = torch.randn(b, s, h, d)
    kc, vc = torch.randn(b, kvh, length, d), torch.randn(b, kvh, length, d)
    pos = torch.tensor([2, 3])
    out = attention(q, kc, vc, pos, 0.5)
    for hh in range(h):
        g = hh // (h // kvh)
        for si in range(s):
            n = int(pos[si]) + 1
            w = torch.softmax(torch.einsum("bd,bld->bl", q[:, si, hh], kc[:, g, :n]) * 0.5, -1)
            ref = torch.einsum("bl,bld->bd", w, vc[:, g, :n])
            torch.testing.assert_close(out[:, si, hh], ref)
