"""The memory plan of one device: weights once, the KV cache, activations by liveness.

Device memory is allocated in *row indices*: row ``r`` of every bank of every channel
(``row_bytes x banks x channels`` bytes). Three regions, bottom up:

* weights: each weight tensor's rows in its resident layout, in graph order (so every
  step of a model, prefill or decode at any batch, puts each weight at the same rows);
* KV cache: each attention's cache rows, sized for the step's batch and capacity;
* host: the host buffers of the step. Constants (embedding table, norm scales, rotary
  tables: bound at every step) and outputs stay whole; every other buffer (activations,
  scratch, staging of weights read by the host) shares an arena by liveness: two
  buffers may overlap when the fragments that use them do not (:func:`pack`).

The host reads and writes its buffers at its own bandwidth (``Host.bandwidth_gbps``); they
are reserved in the device's memory because that is where the processor attached to a PIM
device keeps its working set.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass

from sim.errors import CapacityError
from sim.hardware import DTYPE_BYTES, Hardware

__all__ = ["MemoryPlan", "Live", "pack", "row_index_bytes"]


def row_index_bytes(hw: Hardware) -> int:
    """Bytes of one row index: that row in every bank of every channel."""
    o = hw.org
    return o.row_bytes * o.banks_per_channel * o.channels


@dataclass(frozen=True)
class Live:
    """A host buffer to place: its size in bytes and the fragments that use it."""

    name: str
    nbytes: int
    first: int
    last: int


def pack(buffers: Iterable[Live], align: int = 64) -> tuple[dict[str, int], int]:
    """Byte offsets for ``buffers`` such that two whose fragment ranges overlap never
    overlap in memory, and the arena size. Greedy: largest first, each at the lowest
    offset clear of every placed buffer it is live with (offsets aligned to ``align``)."""
    placed: list[tuple[int, int, Live]] = []
    offsets: dict[str, int] = {}
    top = 0
    for b in sorted(buffers, key=lambda x: (-x.nbytes, x.first, x.name)):
        busy = sorted((o, o + n) for o, n, p in placed if p.first <= b.last and b.first <= p.last)
        off = 0
        for lo, hi in busy:
            if off + b.nbytes <= lo:
                break
            off = max(off, -(-hi // align) * align)
        placed.append((off, b.nbytes, b))
        offsets[b.name] = off
        top = max(top, off + b.nbytes)
    return offsets, top


@dataclass(frozen=True)
class MemoryPlan:
    """One device's memory, in bytes (each region rounded up to whole row indices).

    ``weights``: rows of the resident weight layouts (``weights_data`` of them hold weight
    elements; the rest is layout padding); ``constants``: host-held weights and tables;
    ``kv``: KV-cache rows (``kv_data``: the keys and values themselves);
    ``activations``: the liveness-packed arena and outputs.
    """

    capacity: int
    row_index: int
    weights: int
    weights_data: int
    kv: int
    constants: int
    activations: int
    kv_data: int = 0

    @property
    def host(self) -> int:
        """Rows reserved for host buffers (constants and activations together), in bytes."""
        return -(-(self.constants + self.activations) // self.row_index) * self.row_index

    @property
    def used(self) -> int:
        return self.weights + self.kv + self.host

    @property
    def free(self) -> int:
        return self.capacity - self.used

    @property
    def fits(self) -> bool:
        return self.free >= 0

    def to_dict(self) -> dict:
        return {**asdict(self), "host": self.host, "used": self.used, "free": self.free}

    def check(self, what: str) -> None:
        """Raise CapacityError (a SimError) when the plan exceeds the device, naming every
        region."""
        if not self.fits:
            gb = 1e9
            raise CapacityError(
                f"{what} needs {self.used / gb:.2f} GB (weights {self.weights / gb:.2f}, KV "
                f"cache {self.kv / gb:.2f}, constants and activations {self.host / gb:.2f}); "
                f"the device has {self.capacity / gb:.2f} GB",
                needed=self.used, capacity=self.capacity)


def nbytes(dtype: str, size: int) -> int:
    return DTYPE_BYTES[dtype] * size
