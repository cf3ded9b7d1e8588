"""Rounding of float32 arrays to the device's number formats.

Every value the functional executor stores is a float32 that is exactly representable
in its nominal format. numpy has no bfloat16, so bf16 rounding works on the float32 bit
pattern: round to nearest, ties to even, on the upper 16 bits.
"""

from __future__ import annotations

import numpy as np

from ..errors import ProgramError

__all__ = ["round_to", "DTYPES"]

DTYPES = ("fp16", "bf16", "fp32")


def _round_bf16(x: np.ndarray) -> np.ndarray:
    """Round float32 values to the nearest bf16 value (ties to even), kept as float32."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    lsb = (bits >> np.uint32(16)) & np.uint32(1)
    rounded = (bits + np.uint32(0x7FFF) + lsb) & np.uint32(0xFFFF0000)
    nan = np.isnan(x)
    if nan.any():  # keep NaN a NaN: the carry above could turn it into infinity
        rounded = np.where(nan, (bits | np.uint32(0x00400000)) & np.uint32(0xFFFF0000), rounded)
    return rounded.astype(np.uint32).view(np.float32)


def round_to(x: np.ndarray, dtype: str) -> np.ndarray:
    """``x`` rounded to ``dtype`` ("fp16", "bf16" or "fp32"), returned as float32.

    fp16 overflows to infinity as IEEE half does; the input array is never modified.
    """
    a = np.asarray(x, dtype=np.float32)
    if dtype == "fp32":
        return a.copy() if a is x else a
    if dtype == "fp16":
        with np.errstate(over="ignore"):
            return a.astype(np.float16).astype(np.float32)
    if dtype == "bf16":
        return _round_bf16(a)
    raise ProgramError(f"unknown dtype {dtype!r}: use one of {', '.join(DTYPES)}")
