"""Our own Llama-family decoder (llama, mistral, qwen2) in torch, built for ``torch.export``.

Everything is explicit tensors: ``forward(ids, positions, k_cache, v_cache)`` returns the
logits and the updated caches, so one decode step and one prefill export as plain graphs.
Each block owns its norm and its residual add, so a node's module path names its role.
"""

from __future__ import annotations

import torch
from torch import nn

from . import kernels
from .config import ModelConfig, ModelError

__all__ = ["LlamaModel", "build_model", "empty_cache", "torch_dtype"]

_TORCH_DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}


def torch_dtype(cfg: ModelConfig) -> torch.dtype:
    """The torch dtype of ``cfg.dtype``."""
    return _TORCH_DTYPES[cfg.dtype]


class RMSNorm(nn.Module):
    def __init__(self, n: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return kernels.rmsnorm(x, self.weight, self.eps)


def make_norm(cfg: ModelConfig, n: int) -> nn.Module:
    """The decoder's normalisation over ``n`` features: RMSNorm, or LayerNorm with bias."""
    if cfg.norm == "layernorm":
        return nn.LayerNorm(n, eps=cfg.rms_eps)
    return RMSNorm(n, cfg.rms_eps)


class Attention(nn.Module):
    """Pre-norm attention block: norm, q/k/v, rotary, cache write, GQA attention, o, residual."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.attn_norm = make_norm(cfg, cfg.hidden)
        self.q_proj = nn.Linear(cfg.hidden, cfg.q_dim, bias=cfg.attention_bias)
        self.k_proj = nn.Linear(cfg.hidden, cfg.kv_dim, bias=cfg.attention_bias)
        self.v_proj = nn.Linear(cfg.hidden, cfg.kv_dim, bias=cfg.attention_bias)
        self.o_proj = nn.Linear(cfg.q_dim, cfg.hidden, bias=False)

    def forward(self, x: torch.Tensor, positions: torch.Tensor, kc: torch.Tensor,
                vc: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        c = self.cfg
        b, s, _ = x.shape
        h = self.attn_norm(x)
        q = self.q_proj(h).view(b, s, c.heads, c.head_dim)
        k = self.k_proj(h).view(b, s, c.kv_heads, c.head_dim)
        v = self.v_proj(h).view(b, s, c.kv_heads, c.head_dim)
        q, k = kernels.rope(q, k, positions, c.rope_theta)
        kc = kc.index_copy(2, positions, k.transpose(1, 2))
        vc = vc.index_copy(2, positions, v.transpose(1, 2))
        o = kernels.attention(q, kc, vc, positions, c.head_dim ** -0.5)
        return x + self.o_proj(o.reshape(b, s, c.q_dim)), kc, vc


class MLP(nn.Module):
    """Pre-norm SwiGLU block: norm, gate/up, SiLU(gate) * up, down, residual."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.ffn_norm = make_norm(cfg, cfg.hidden)
        self.gate_proj = nn.Linear(cfg.hidden, cfg.intermediate, bias=False)
        self.up_proj = nn.Linear(cfg.hidden, cfg.intermediate, bias=False)
        self.down_proj = nn.Linear(cfg.intermediate, cfg.hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.ffn_norm(x)
        return x + self.down_proj(nn.functional.silu(self.gate_proj(h)) * self.up_proj(h))


class DecoderLayer(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.attn = Attention(cfg)
        self.mlp = MLP(cfg)

    def forward(self, x: torch.Tensor, positions: torch.Tensor, kc: torch.Tensor,
                vc: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        x, kc, vc = self.attn(x, positions, kc, vc)
        return self.mlp(x), kc, vc


class LlamaModel(nn.Module):
    """Embedding, ``cfg.layers`` decoder layers, final norm, LM head (tied if configured)."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab, cfg.hidden)
        self.layers = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.layers))
        self.norm = make_norm(cfg, cfg.hidden)
        self.lm_head = nn.Linear(cfg.hidden, cfg.vocab, bias=False)
        if cfg.tie_embeddings:
            self.lm_head.weight = self.embed.weight

    def forward(self, ids: torch.Tensor, positions: torch.Tensor | int, k_cache: torch.Tensor,
                v_cache: torch.Tensor, *, logits_last: bool = False
                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """ids [B,S]; positions [S] (or the int start position); caches [layers,B,KVH,L,d].

        Returns logits [B,S,vocab] (``[B,1,vocab]`` if ``logits_last``) and the caches with
        the new tokens' keys and values written at ``positions``.
        """
        if isinstance(positions, int):
            positions = torch.arange(positions, positions + ids.shape[1], device=ids.device)
        x = self.embed(ids)
        ks, vs = [], []
        for i, layer in enumerate(self.layers):
            x, kc, vc = layer(x, positions, k_cache[i], v_cache[i])
            ks.append(kc)
            vs.append(vc)
        if logits_last:
            x = x[:, -1:]
        return self.lm_head(self.norm(x)), torch.stack(ks), torch.stack(vs)


def empty_cache(cfg: ModelConfig, batch: int, length: int, *, device: str = "cpu",
                dtype: torch.dtype | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Zeroed K and V caches ``[layers, batch, kv_heads, length, head_dim]``."""
    shape = (cfg.layers, batch, cfg.kv_heads, length, cfg.head_dim)
    dt = dtype or torch_dtype(cfg)
    return (torch.zeros(shape, device=device, dtype=dt),
            torch.zeros(shape, device=device, dtype=dt))


def build_model(cfg: ModelConfig, *, seed: int = 0, device: str = "cpu",
                dtype: torch.dtype | None = None) -> LlamaModel:
    """The decoder for ``cfg`` in eval mode, in ``dtype`` (default: the config's).

    On ``device="meta"`` no memory is allocated and no weights are drawn. Otherwise weights
    are N(0, 0.02) from a generator seeded with ``seed`` (same seed, same weights), norm
    scales are 1.
    """
    if device not in ("cpu", "meta"):
        raise ModelError(f"device {device!r} is not supported; use 'cpu' or 'meta'")
    dt = dtype or torch_dtype(cfg)
    with torch.device("meta"):
        model = LlamaModel(cfg)
    model = model.to(dtype=dt)
    if device == "cpu":
        model = model.to_empty(device="cpu")
        if cfg.tie_embeddings:
            model.lm_head.weight = model.embed.weight
        gen = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for name, p in model.named_parameters():
                if name.endswith("norm.weight"):
                    p.fill_(1.0)
                else:
                    p.copy_(torch.randn(p.shape, generator=gen) * 0.02)
    return model.eval()
