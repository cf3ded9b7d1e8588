"""Element-wise activations by name, float32 numpy: host ops, epilogue stages and the
``{name}_mul`` gating all read this one table, with each one's FLOPs per element."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

__all__ = ["ACTIVATIONS", "ACT_FLOPS", "gelu_erf", "gelu_tanh", "silu", "soft_cap"]

Arr = np.ndarray


def silu(x: Arr) -> Arr:
    """``x * sigmoid(x)``."""
    return x / (1.0 + np.exp(-x))


def gelu_tanh(x: Arr) -> Arr:
    """GELU, tanh approximation."""
    return 0.5 * x * (1.0 + np.tanh(0.7978845608028654 * (x + 0.044715 * x**3)))


def _erf(x: Arr) -> Arr:
    """erf to float32 accuracy (Abramowitz and Stegun 7.1.26 is not enough; this is the
    complementary-error Chebyshev fit of Numerical Recipes, |error| < 1.2e-7)."""
    z = np.abs(x)
    t = 1.0 / (1.0 + 0.5 * z)
    poly = -z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (
        0.09678418 + t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (
            1.48851587 + t * (-0.82215223 + t * 0.17087277))))))))
    return np.sign(x) * (1.0 - t * np.exp(poly))


def gelu_erf(x: Arr) -> Arr:
    """GELU, exact (erf) form."""
    return 0.5 * x * (1.0 + _erf(x * 0.7071067811865476))


def soft_cap(x: Arr, cap: float) -> Arr:
    """``cap * tanh(x / cap)``: ``x`` squashed into ``(-cap, cap)`` (Gemma 2's logits)."""
    return cap * np.tanh(x / cap)


ACTIVATIONS: dict[str, Callable[[Arr], Arr]] = {
    "silu": silu, "relu": lambda x: np.maximum(x, 0), "gelu_tanh": gelu_tanh,
    "gelu_erf": gelu_erf}
# FLOPs per element of each activation
ACT_FLOPS: dict[str, float] = {"silu": 5.0, "relu": 1.0, "gelu_tanh": 8.0, "gelu_erf": 10.0}
