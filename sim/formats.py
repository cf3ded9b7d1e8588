"""Weight number formats: the integer formats a model's linear weights may be stored in,
their bytes, and their arithmetic (round-to-nearest quantization, int4 packing, and the
dequantization a unit, its epilogue or the host applies).

A format is named by a string that is also a workload's ``dtype``: ``fp16`` / ``bf16``
(unquantized), ``w8`` (int8, one scale per output channel), ``w4g128`` (int4, one scale
per group of 128 consecutive k-elements of an output), ``w4g128a`` (asymmetric: an int4
zero point per group too). Conventions follow the ``compressed-tensors`` ``int`` quantizer
(symmetric: ``q`` in ``[-2^(b-1), 2^(b-1) - 1]``, scale = max|w| / ((2^b - 1) / 2);
asymmetric: scale = (max - min) / (2^b - 1) with min <= 0 <= max, zero point =
``q_min - round(min / scale)``), and dequantization ``(q - z) * s`` rounded to the
scale's type, as ``compressed-tensors`` computes it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from .errors import AutoschedError

__all__ = ["FLOAT_FORMATS", "Quantized", "WeightFormat", "dequant_site", "dequantize",
           "pack_int32", "quantize_rtn", "unpack_int32", "weight_format"]

FLOAT_FORMATS = ("fp16", "bf16", "fp32")
_NAME = re.compile(r"^w(4|8)(?:g(\d+))?(a?)$")
SCALE_BYTES = 2  # scales are stored as fp16 or bf16


@dataclass(frozen=True)
class WeightFormat:
    """``bits`` per weight (16: unquantized), ``group`` k-elements per scale (0: one
    scale per output channel), ``symmetric`` (False: a zero point per group too)."""

    bits: int
    group: int = 0
    symmetric: bool = True

    @property
    def quantized(self) -> bool:
        return self.bits < 16

    @property
    def name(self) -> str:
        if not self.quantized:
            return "fp16"
        return f"w{self.bits}" + (f"g{self.group}" if self.group else "") + \
            ("" if self.symmetric else "a")

    @property
    def kind(self) -> str:
        """The unit feature the format needs: ``int8``, ``int4``, or ``float``."""
        return f"int{self.bits}" if self.quantized else "float"

    @property
    def qmin(self) -> int:
        return -(1 << (self.bits - 1))

    @property
    def qmax(self) -> int:
        return (1 << (self.bits - 1)) - 1

    def groups(self, k: int) -> int:
        """Scales per output channel of a ``k``-wide weight."""
        return 1 if not self.group else -(-k // self.group)

    def weight_bytes(self, n: int, k: int, float_bytes: int = 2) -> int:
        """Bytes of an ``[n, k]`` weight: packed integers, their scales and zero points
        (``float_bytes`` per element when unquantized)."""
        if not self.quantized:
            return n * k * float_bytes
        g = self.groups(k)
        zeros = 0 if self.symmetric else -(-n * g * self.bits // 8)
        return -(-n * k * self.bits // 8) + n * g * SCALE_BYTES + zeros


def weight_format(name: str) -> WeightFormat:
    """The format a name (``fp16``, ``bf16``, ``w8``, ``w4g128``, ``w4g64a``...) denotes."""
    if name in FLOAT_FORMATS:
        return WeightFormat(16)
    m = _NAME.match(str(name))
    if m is None:
        raise AutoschedError(f"weight format {name!r} unknown: use fp16, bf16, w8, w8g<G>, "
                             "w4g<G> or w4g<G>a (asymmetric), G a power of two >= 16")
    bits, group, asym = int(m[1]), int(m[2] or 0), bool(m[3])
    if group and (group < 16 or group & (group - 1)):
        raise AutoschedError(f"weight format {name!r}: the group must be a power of two >= 16")
    if bits == 4 and not group:
        raise AutoschedError(f"weight format {name!r}: int4 needs a group size (w4g128)")
    return WeightFormat(bits, group, not asym)


def dequant_site(fmt: WeightFormat, hw) -> str:
    """Where weights of ``fmt`` are dequantized on device ``hw`` (a ``Hardware``): ``float``
    (not quantized), ``bank`` (the units take the format and its group: the banks hold
    codes and scales) or ``load`` (the host dequantizes once, at load; the banks hold
    ``pim.dtype`` values)."""
    if not fmt.quantized:
        return "float"
    ok = hw.takes(fmt.kind) and (not fmt.group or fmt.group in hw.formats.group_sizes)
    return "bank" if ok else "load"


@dataclass(frozen=True)
class Quantized:
    """An ``[n, k]`` weight as integer codes ``q`` (int8 array), ``scale`` and ``zero``
    (``[n, groups]``; zero all 0 when symmetric) in ``fmt``."""

    q: np.ndarray
    scale: np.ndarray
    zero: np.ndarray
    fmt: WeightFormat


def _grouped(w: np.ndarray, fmt: WeightFormat) -> np.ndarray:
    n, k = w.shape
    g = fmt.group or k
    if k % g:
        raise AutoschedError(f"a weight of k={k} does not split into groups of {g}")
    return w.reshape(n, k // g, g)


def quantize_rtn(w: np.ndarray, fmt: WeightFormat, scale_dtype: str = "fp16") -> Quantized:
    """Round-to-nearest quantization of ``w [n, k]`` (min/max per group, no calibration)."""
    from .functional.dtypes import round_to

    wg = _grouped(np.asarray(w, np.float32), fmt)
    lo, hi = np.minimum(wg.min(-1), 0.0), np.maximum(wg.max(-1), 0.0)
    span = float(fmt.qmax - fmt.qmin)
    if fmt.symmetric:
        scale = np.maximum(np.abs(lo), np.abs(hi)) / (span / 2)
    else:
        scale = (hi - lo) / span
    scale = round_to(np.where(scale > 0, scale, 1.0), scale_dtype)
    zero = np.zeros_like(scale) if fmt.symmetric else \
        np.clip(fmt.qmin - np.round(lo / scale), fmt.qmin, fmt.qmax)
    q = np.clip(np.round(wg / scale[..., None] + zero[..., None]), fmt.qmin, fmt.qmax)
    return Quantized(q.reshape(w.shape).astype(np.int8), scale.astype(np.float32),
                     zero.astype(np.int8), fmt)


def dequantize(qw: Quantized, dtype: str = "fp16") -> np.ndarray:
    """``(q - z) * s`` per group, rounded to ``dtype`` (the scale's type), as float32."""
    from .functional.dtypes import round_to

    q = _grouped(qw.q.astype(np.float32), qw.fmt)
    v = (q - qw.zero[..., None].astype(np.float32)) * qw.scale[..., None].astype(np.float32)
    return round_to(v.reshape(qw.q.shape), dtype)


def pack_int32(q: np.ndarray, bits: int, axis: int = 1) -> np.ndarray:
    """Signed ``bits``-bit codes packed ``32 / bits`` to an int32 along ``axis`` (the
    first code in the lowest bits, each offset by ``2^(bits-1)``), as
    ``compressed-tensors``' ``pack-quantized`` format stores them."""
    per = 32 // bits
    u = (np.moveaxis(np.asarray(q, np.int64), axis, -1) + (1 << (bits - 1))).astype(np.uint32)
    if u.shape[-1] % per:
        pad = per - u.shape[-1] % per
        u = np.concatenate([u, np.zeros((*u.shape[:-1], pad), np.uint32)], axis=-1)
    u = u.reshape(*u.shape[:-1], -1, per)
    word = np.zeros(u.shape[:-1], np.uint32)
    for i in range(per):
        word |= u[..., i] << np.uint32(bits * i)
    return np.moveaxis(word.view(np.int32), -1, axis)


def unpack_int32(packed: np.ndarray, bits: int, size: int, axis: int = 1) -> np.ndarray:
    """The ``size`` signed codes along ``axis`` of :func:`pack_int32`'s words (int8)."""
    per, mask = 32 // bits, np.uint32((1 << bits) - 1)
    w = np.moveaxis(np.asarray(packed).astype(np.int32).view(np.uint32), axis, -1)
    parts = [((w >> np.uint32(bits * i)) & mask) for i in range(per)]
    u = np.stack(parts, axis=-1).reshape(*w.shape[:-1], -1)[..., :size]
    return np.moveaxis(u.astype(np.int16) - (1 << (bits - 1)), -1, axis).astype(np.int8)
