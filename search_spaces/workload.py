"""The workload: one operator instance, by family and named shape, independent of hardware.

Families and their dimensions (all positive ints):

=============  ==========================================================
``gemv``       m (rows of the activation: batch x tokens, small), n (out), k (in)
``gemm``       m (large), n, k
``attention``  b (batch), q (query tokens), h (query heads), kvh (KV heads),
               d (head dim), l (context length incl. the new tokens)
``rmsnorm``    m, n
``layernorm``  m, n (weight and bias)
``rope``       m, h (heads rotated), d
``elementwise`` m, n; attr ``fn``: add | mul | silu | silu_mul
``embedding``  m, n (hidden), v (vocab)
``argmax``     m, n
=============  ==========================================================
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

__all__ = ["FAMILIES", "Workload"]

FAMILIES: dict[str, tuple[str, ...]] = {
    "gemv": ("m", "n", "k"),
    "gemm": ("m", "n", "k"),
    "attention": ("b", "q", "h", "kvh", "d", "l"),
    "rmsnorm": ("m", "n"),
    "layernorm": ("m", "n"),
    "rope": ("m", "h", "d"),
    "elementwise": ("m", "n"),
    "embedding": ("m", "n", "v"),
    "argmax": ("m", "n"),
}


@dataclass(frozen=True)
class Workload:
    """``op`` family, ``shape`` as sorted-by-family (dim, size) pairs, dtype, extra attrs."""

    op: str
    shape: tuple[tuple[str, int], ...]
    dtype: str = "fp16"
    attrs: tuple[tuple[str, str | int | float], ...] = ()

    @classmethod
    def make(cls, op: str, dtype: str = "fp16", attrs: dict | None = None, **dims: int) -> Workload:
        """``Workload.make("gemv", m=1, n=4096, k=4096)``; dims in the family's order."""
        from sim.errors import AutoschedError

        if op not in FAMILIES:
            raise AutoschedError(f"unknown operator family {op!r} (known: {', '.join(FAMILIES)})")
        want = FAMILIES[op]
        if set(dims) != set(want):
            got = ", ".join(sorted(dims))
            raise AutoschedError(f"{op} needs dims {', '.join(want)}; got {got}")
        for d, v in dims.items():
            if not isinstance(v, int) or v <= 0:
                raise AutoschedError(f"{op} dim {d} must be a positive integer, got {v!r}")
        shape = tuple((d, int(dims[d])) for d in want)
        return cls(op, shape, dtype, tuple(sorted((attrs or {}).items())))

    @property
    def dims(self) -> dict[str, int]:
        return dict(self.shape)

    def attr(self, name: str, default: str | int | float | None = None):
        return dict(self.attrs).get(name, default)

    @property
    def key(self) -> str:
        """Stable, human-readable key: ``gemv:m=1,n=4096,k=4096:fp16[:fn=silu]``."""
        s = f"{self.op}:" + ",".join(f"{d}={v}" for d, v in self.shape) + f":{self.dtype}"
        if self.attrs:
            s += ":" + ",".join(f"{k}={v}" for k, v in self.attrs)
        return s

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.key.encode()).hexdigest()[:16]

    def to_dict(self) -> dict:
        return {"op": self.op, "shape": dict(self.shape), "dtype": self.dtype,
                "attrs": dict(self.attrs)}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, d: dict) -> Workload:
        return cls.make(d["op"], d.get("dtype", "fp16"), d.get("attrs") or None, **d["shape"])
