"""The workload: one operator instance, by family and named shape, independent of hardware.

Each family's space folder (``search_spaces/<folder>/``) declares the workload ops it
defines and their dimensions in ``DIMS`` (op -> dim names, all positive ints), beside
their meaning; :data:`FAMILIES` gathers every folder's on first use, so a new family is
its folder. The attribute ``fn``, ``epilogue`` and the like are the family's own.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import pkgutil
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

__all__ = ["FAMILIES", "Workload"]

class _Dims(Mapping[str, tuple[str, ...]]):
    """op -> its dims, read from every space folder's ``DIMS`` the first time it is asked."""

    def __init__(self) -> None:
        self._dims: dict[str, tuple[str, ...]] | None = None

    def _load(self) -> dict[str, tuple[str, ...]]:
        if self._dims is None:
            import search_spaces

            dims: dict[str, tuple[str, ...]] = {}
            for info in sorted(pkgutil.iter_modules(search_spaces.__path__),
                               key=lambda i: i.name):
                if info.ispkg:
                    mod = importlib.import_module(f"search_spaces.{info.name}")
                    dims.update(getattr(mod, "DIMS", {}))
            self._dims = dims
        return self._dims

    def reload(self) -> None:
        """Read the space folders again (a folder added to ``search_spaces.__path__``)."""
        self._dims = None

    def __getitem__(self, op: str) -> tuple[str, ...]:
        return self._load()[op]

    def __iter__(self) -> Iterator[str]:
        return iter(self._load())

    def __len__(self) -> int:
        return len(self._load())


FAMILIES: Mapping[str, tuple[str, ...]] = _Dims()


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
