"""Parameters a model computes from a stored tensor before using it, named in one string.

A pattern that claims ``x * (1 + w)`` (Gemma's norm scale), an embedding times a
multiplier, a linear's output times a constant, or one part of a packed ``qkv`` weight
names the tensor it reads as the stored name plus transforms: ``name@o=1.0``,
``name@s=0.22``, ``name@s=buffer:model.embed_tokens.embed_scale`` (a module buffer's
value), ``name@r=384:0:128`` (the rows ``lo:hi`` of each block of ``period`` rows:
one slice of every head's packed rows). :func:`parse` reads the string back;
``Weights.get`` applies it, so every family reads derived tensors as it reads stored ones.
Transforms apply in the order rows, scale, offset.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["BUFFER", "Derived", "derived", "parse"]

SEP = "@"
BUFFER = "buffer:"


@dataclass(frozen=True)
class Derived:
    """A stored tensor ``name`` and what is done to it."""

    name: str
    scale: float | str = 1.0  # a number, or ``buffer:`` + a module buffer's name
    offset: float = 0.0
    rows: tuple[int, int, int] | None = None  # (period, lo, hi)

    def apply(self, x: np.ndarray, scale: float) -> np.ndarray:
        """``x`` (the stored tensor) transformed; ``scale`` is the resolved multiplier."""
        if self.rows is not None:
            period, lo, hi = self.rows
            x = x.reshape(-1, period, *x.shape[1:])[:, lo:hi].reshape(-1, *x.shape[1:])
        return (x * np.float32(scale) + np.float32(self.offset)).astype(np.float32)


def derived(name: str, *, scale: float | str = 1.0, offset: float = 0.0,
            rows: tuple[int, int, int] | None = None) -> str:
    """The derived name of ``name`` with these transforms (composed onto any it has)."""
    d = parse(name)
    if d.rows is not None and rows is not None:
        raise ValueError(f"{name}: a part of a part is not supported")
    if isinstance(scale, str) and (isinstance(d.scale, str) or d.offset):
        raise ValueError(f"{name}: a buffer scale composes only with a plain tensor")
    if isinstance(d.scale, str) and (isinstance(scale, str) or offset or scale != 1.0):
        raise ValueError(f"{name}: a buffer scale composes only with a plain tensor")
    if isinstance(d.scale, str) or isinstance(scale, str):
        s: float | str = scale if isinstance(scale, str) else d.scale
        o = d.offset
    else:
        s, o = float(d.scale) * float(scale), d.offset * float(scale) + offset
    parts = []
    if d.rows is not None or rows is not None:
        parts.append("r=" + ":".join(str(v) for v in (rows or d.rows)))
    if s != 1.0:
        parts.append(f"s={s!r}" if not isinstance(s, str) else f"s={s}")
    if o:
        parts.append(f"o={o!r}")
    return d.name + (SEP + ",".join(parts) if parts else "")


def parse(spec: str) -> Derived:
    """The :class:`Derived` a name spells (a stored name: no transform)."""
    name, sep, rest = spec.partition(SEP)
    if not sep:
        return Derived(name)
    scale: float | str = 1.0
    offset, rows = 0.0, None
    for part in rest.split(","):
        key, _, val = part.partition("=")
        if key == "s":
            scale = val if val.startswith(BUFFER) else float(val)
        elif key == "o":
            offset = float(val)
        elif key == "r":
            p, lo, hi = (int(v) for v in val.split(":"))
            rows = (p, lo, hi)
        else:
            raise ValueError(f"derived parameter {spec!r}: unknown transform {key!r}")
    return Derived(name, scale, offset, rows)
