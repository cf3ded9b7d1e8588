"""Numbers of a model config that ``transformers`` takes without checking: the rotary
scaling parameters (``rope_scaling`` or ``rope_parameters``).

Each number must be finite and within what a real model could use: a scaling ``factor``
of NaN or below zero would reach the rotary tables and make every logit NaN, so a
run's check would compare NaN with NaN. One line names the field and the range.
"""

from __future__ import annotations

import math
from typing import Any

from sim.files import shown

from .config import fail

__all__ = ["ROPE_BOUNDS", "check_rope"]

# name -> (lowest, highest, lowest allowed itself): generous, far beyond any released model
ROPE_BOUNDS: dict[str, tuple[float, float, bool]] = {
    "factor": (0.0, 1024.0, False), "original_max_position_embeddings": (1, 1 << 24, True),
    "low_freq_factor": (0.0, 1e4, False), "high_freq_factor": (0.0, 1e4, False),
    "beta_fast": (0.0, 1e4, False), "beta_slow": (0.0, 1e4, False),
    "mscale": (0.0, 1e4, False), "mscale_all_dim": (0.0, 1e4, True),
    "attention_factor": (0.0, 1e4, False), "rope_theta": (0.0, 1e12, False),
    "partial_rotary_factor": (0.0, 1.0, False), "long_factor": (0.0, 1e4, False),
    "short_factor": (0.0, 1e4, False),
}
_OTHER = (0.0, 1e12, True)  # any other number a rotary variant may add


def _number_ok(v: object, lo: float, hi: float, closed: bool) -> bool:
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        return False
    return (lo <= v if closed else lo < v) and v <= hi


def check_rope(hf: dict[str, Any], label: str) -> None:
    """Raise :class:`ModelError` for a rotary parameter that is not a number in range
    (a config with tables per layer type, Gemma 3's, nests one mapping per type)."""
    for key in ("rope_scaling", "rope_parameters"):
        params = hf.get(key)
        if isinstance(params, dict) and params and all(isinstance(v, dict)
                                                       for v in params.values()):
            for kind, sub in params.items():
                check_rope({key: sub}, f"{label} ({key}.{shown(kind, 40)[1:-1]})")
            continue
        if not isinstance(params, dict):
            continue
        for name, v in params.items():
            if isinstance(v, str | bool) or v is None:
                continue
            lo, hi, closed = ROPE_BOUNDS.get(name, _OTHER)
            values = v if isinstance(v, list) and name.endswith("_factor") else [v]
            if not values or not all(_number_ok(x, lo, hi, closed) for x in values):
                span = f"{'[' if closed else '('}{lo:g}, {hi:g}]"
                raise fail(label, f"{key}.{shown(name, 40)[1:-1]} must be a number in "
                                  f"{span}, got {shown(v)}")
