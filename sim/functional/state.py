"""Run-time state of a program: host buffers and the channels of one PIM stream.

Addresses are evaluated once per instruction for all channels of a stream: an operand
is an ``int`` (same on every channel) or an ``int`` array over the stream's channels.
Scalar operands take slicing fast paths that return views; per-channel operands fall
back to advanced indexing. Every accessor returns arrays shaped
``[channels, target banks or units, ...]``.
"""

from __future__ import annotations

import numpy as np

from ..errors import ProgramError, SimError
from ..hardware import Hardware
from ..program import Program
from .dtypes import round_to
from .memory import DeviceMemory

__all__ = ["ChannelState", "HostBuffers", "Operand"]

Operand = int | np.ndarray


class HostBuffers:
    """The program's host buffers as flat float32 arrays holding values of their dtype."""

    def __init__(self, program: Program, inputs: dict[str, np.ndarray]) -> None:
        self.dtype = {b.name: b.dtype for b in program.buffers}
        self.data = {b.name: np.zeros(b.size, np.float32) for b in program.buffers}
        for name, value in inputs.items():
            if name not in self.data:
                raise ProgramError(
                    f"input {name!r} binds no buffer (buffers: {', '.join(sorted(self.data))})"
                )
            flat = np.asarray(value, dtype=np.float32).reshape(-1)
            if flat.size != self.data[name].size:
                raise ProgramError(
                    f"input {name!r} has {flat.size} elements, buffer holds {self.data[name].size}"
                )
            self.data[name][:] = round_to(flat, self.dtype[name])

    def read(self, name: str, off: Operand, k: int) -> np.ndarray:
        """``[1, k]`` for a scalar offset, ``[n, k]`` for per-channel offsets."""
        buf = self.data[name]
        if isinstance(off, np.ndarray):
            return buf[off[:, None] + np.arange(k)]
        return buf[off:off + k][None, :]

    def write(self, name: str, off: Operand, values: np.ndarray) -> None:
        """Store ``values`` ``[n, k]`` rounded to the buffer dtype at ``off`` per channel."""
        buf = self.data[name]
        v = round_to(values, self.dtype[name])
        k = v.shape[-1]
        if isinstance(off, np.ndarray):
            buf[off[:, None] + np.arange(k)] = v
        else:
            buf[off:off + k] = v.reshape(-1, k)[-1]


class ChannelState:
    """Open rows, global buffers and accumulators of one PIM stream's channels."""

    def __init__(self, hw: Hardware, mem: DeviceMemory, channels: tuple[int, ...]) -> None:
        self.hw, self.mem, self.n = hw, mem, len(channels)
        p, o = hw.pim, hw.org
        self.lanes = p.lanes
        self.cidx = np.arange(self.n)
        self.gch_arr = np.asarray(channels, dtype=np.int64)
        contiguous = self.n > 0 and bool(np.all(np.diff(self.gch_arr) == 1))
        self.gch: slice | np.ndarray = (
            slice(channels[0], channels[0] + self.n) if contiguous else self.gch_arr
        )
        self.open = np.full((self.n, o.banks_per_channel), -1, np.int64)
        self.gb = np.zeros((self.n, hw.gb_elems), np.float32)
        self.acc = np.zeros((self.n, hw.units_per_channel, p.registers, p.register_lanes),
                            np.float32)

    # ---- targets ------------------------------------------------------------------
    def banks(self, bank: int, step: int) -> tuple[slice, np.ndarray]:
        stop = self.hw.org.banks_per_channel if step else bank + 1
        sl = slice(bank, stop, step or 1)
        return sl, np.arange(bank, stop, step or 1)

    def units(self, bank: int, step: int) -> tuple[slice, np.ndarray]:
        bpu = self.hw.pim.banks_per_unit
        u = bank // bpu
        stop = self.hw.units_per_channel if step else u + 1
        ustep = max(step // bpu, 1)
        return slice(u, stop, ustep), np.arange(u, stop, ustep)

    # ---- open-row columns -----------------------------------------------------------
    def _rows(self, bsl: slice, what: str) -> np.ndarray:
        rows = self.open[:, bsl]
        if (rows < 0).any():
            c, b = np.argwhere(rows < 0)[0]
            raise SimError(f"{what} on a bank with no open row (channel "
                           f"{self.gch_arr[c]}, bank {bsl.start + b * bsl.step}): act first")
        return rows

    def _elems(self, col: Operand, k: int, per: int | None = None) -> np.ndarray:
        return np.broadcast_to(np.asarray(col)[..., None] * (per or self.lanes) + np.arange(k),
                               (self.n, k))

    def read_cols(self, bsl: slice, bidx: np.ndarray, col: Operand, k: int,
                  per: int | None = None) -> np.ndarray:
        """``[n, banks, k]`` elements of the open rows from column ``col`` (``per``
        elements per column: ``lanes``, or a denser weight format's)."""
        per = per or self.lanes
        rows = self._rows(bsl, "column read")
        r0 = int(rows.flat[0])
        if (rows == r0).all():
            arr = self.mem.row_array(r0)
            if arr is None:
                return np.zeros((self.n, len(bidx), k), np.float32)
            if not isinstance(col, np.ndarray):
                return arr[self.gch, bsl, col * per:col * per + k]
            e = self._elems(col, k, per)
            return arr[self.gch_arr[:, None, None], bidx[None, :, None], e[:, None, :]]
        out = np.zeros((self.n, len(bidx), k), np.float32)
        e = self._elems(col, k, per)
        for r in np.unique(rows):
            arr = self.mem.row_array(int(r))
            if arr is not None:
                ci, bi = np.nonzero(rows == r)
                out[ci, bi] = arr[self.gch_arr[ci][:, None], bidx[bi][:, None], e[ci]]
        return out

    def write_cols(self, bsl: slice, bidx: np.ndarray, col: Operand, values: np.ndarray) -> None:
        """Store ``values`` ``[n, banks, k]`` (rounded to the bank dtype) from column ``col``."""
        rows = self._rows(bsl, "column write")
        v = np.broadcast_to(round_to(values, self.hw.pim.dtype), (self.n, len(bidx),
                                                                   values.shape[-1]))
        e = self._elems(col, v.shape[-1])
        for r in np.unique(rows):
            arr = self.mem.row_array(int(r), create=True)
            ci, bi = np.nonzero(rows == r)
            arr[self.gch_arr[ci][:, None], bidx[bi][:, None], e[ci]] = v[ci, bi]

    # ---- registers and global buffer ------------------------------------------------
    def acc_index(self, usl: slice, uidx: np.ndarray, reg: Operand, nregs: int = 1) -> tuple:
        """Index of ``acc`` selecting ``[n, units, nregs, register_lanes]``."""
        if isinstance(reg, np.ndarray):
            return (self.cidx[:, None, None], uidx[None, :, None],
                    reg[:, None, None] + np.arange(nregs))
        return (slice(None), usl, slice(reg, reg + nregs))

    def gb_index(self, off: Operand, k: int) -> tuple:
        """Index of ``gb`` selecting ``[n, k]`` elements from ``off``."""
        if isinstance(off, np.ndarray):
            return (self.cidx[:, None], off[:, None] + np.arange(k))
        return (slice(None), slice(off, off + k))
