"""The decoder's composite operators as torch custom ops (``torch.ops.autosched.*``).

RMSNorm, rotary embedding and cached attention are registered as custom ops so that
``torch.export`` keeps each one as a single leaf node: the capture maps a leaf straight to
one workload instead of pattern-matching the dozen aten ops inside it. The eager kernels
are the reference numerics (float32 internally, cast back to the input dtype); the fake
kernels give shapes on meta and fake tensors, so a capture never touches weights.
"""

import torch

__all__ = ["attention", "rmsnorm", "rope"]


@torch.library.custom_op("autosched::rmsnorm", mutates_args=())
def rmsnorm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """``x / sqrt(mean(x^2) + eps) * weight`` over the last dim; x [..., n], weight [n]."""
    xf = x.float()
    y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return (y * weight.float()).to(x.dtype)


@rmsnorm.register_fake
def _rmsnorm_fake(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return torch.empty_like(x)


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


@torch.library.custom_op("autosched::rope", mutates_args=())
def rope(q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor,
         theta: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Rotate-half rotary embedding (Hugging Face convention) of q [B,S,H,d], k [B,S,KVH,d].

    ``positions`` [S] are the absolute token positions; frequencies ``theta^(-2i/d)``.
    """
    d = q.shape[-1]
    inv = 1.0 / theta ** (torch.arange(0, d, 2, device=q.device, dtype=torch.float32) / d)
    ang = positions.to(torch.float32)[:, None] * inv[None, :]
    ang = torch.cat((ang, ang), dim=-1)[None, :, None, :]
    cos, sin = ang.cos(), ang.sin()

    def rot(x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        return (xf * cos + _rotate_half(xf) * sin).to(x.dtype)

    return rot(q), rot(k)


@rope.register_fake
def _rope_fake(q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor,
               theta: float) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.empty_like(q), torch.empty_like(k)


@torch.library.custom_op("autosched::attention", mutates_args=())
def attention(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
              positions: torch.Tensor, scale: float) -> torch.Tensor:
    """Causal grouped-query attention of q [B,S,H,d] over caches [B,KVH,L,d] -> [B,S,H,d].

    Query ``s`` (at absolute position ``positions[s]``) sees cache slots ``j <= positions[s]``;
    query head ``h`` reads KV head ``h // (H // KVH)``. Scores and softmax in float32.
    """
    b, s, h, d = q.shape
    kvh, length = k_cache.shape[1], k_cache.shape[2]
    qg = q.float().transpose(1, 2).reshape(b, kvh, h // kvh, s, d)
    scores = torch.einsum("bkgsd,bkld->bkgsl", qg, k_cache.float()) * scale
    visible = torch.arange(length, device=q.device)[None, :] <= positions[:, None]
    scores = scores.masked_fill(~visible, float("-inf"))
    out = torch.einsum("bkgsl,bkld->bkgsd", scores.softmax(dim=-1), v_cache.float())
    return out.reshape(b, h, s, d).transpose(1, 2).contiguous().to(q.dtype)


@attention.register_fake
def _attention_fake(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                    positions: torch.Tensor, scale: float) -> torch.Tensor:
    return torch.empty_like(q)
