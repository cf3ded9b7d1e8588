"""Device memory contents for functional execution, allocated lazily one row at a time.

A touched row index ``r`` owns one float32 array ``[channels, banks, row_elems]`` (the
same row in every bank of every channel), so a bank command over many channels and banks
is a single numpy slice. Untouched rows read as zero and cost nothing. Values are
stored rounded to ``hw.pim.dtype``.

A row holding integer-format weights (``hw.formats``) holds ``hw.density(kind)`` times
as many of them; its elements are the values the unit's in-bank dequantizer delivers to
the lanes, ``(q - z) * s`` rounded to ``pim.dtype`` (the codes and scales themselves are
packed and checked by :mod:`sim.formats`), so rows are ``row_elems`` times the densest
format taken wide.
"""

from __future__ import annotations

import numpy as np

from ..errors import SimError
from ..hardware import Hardware
from .dtypes import round_to

__all__ = ["DeviceMemory"]


class DeviceMemory:
    """Bank contents of one device; mutated by writes and by executed programs."""

    def __init__(self, hw: Hardware) -> None:
        self.hw = hw
        self._rows: dict[int, np.ndarray] = {}
        self.width = hw.row_elems * max((hw.density(k) for k in hw.formats.weights), default=1)

    @property
    def rows_allocated(self) -> int:
        """How many row indices hold an array (each ``channels*banks*row_elems`` floats)."""
        return len(self._rows)

    def row_array(self, row: int, create: bool = False) -> np.ndarray | None:
        """The ``[channels, banks, row_elems]`` array of ``row``; None if never written."""
        arr = self._rows.get(row)
        if arr is None and create:
            o = self.hw.org
            arr = np.zeros((o.channels, o.banks_per_channel, self.width), np.float32)
            self._rows[row] = arr
        return arr

    def _check(self, ch: np.ndarray, bank: np.ndarray, row: np.ndarray) -> None:
        o = self.hw.org
        for name, v, hi in (("ch", ch, o.channels), ("bank", bank, o.banks_per_channel),
                            ("row", row, o.rows_per_bank)):
            if v.size and (v.min() < 0 or v.max() >= hi):
                raise SimError(f"memory access with {name} outside [0, {hi}): {v.min()}..{v.max()}")

    def _span(self, col_elem: int, n: int) -> None:
        if col_elem < 0 or n < 0 or col_elem + n > self.width:
            raise SimError(
                f"elements [{col_elem}, {col_elem + n}) do not fit in a row of "
                f"{self.width} elements: split the run across rows"
            )

    def write(self, ch: int, bank: int, row: int, col_elem: int, values: np.ndarray) -> None:
        """Write a 1-D run of elements from element ``col_elem`` of one bank row."""
        v = np.asarray(values, dtype=np.float32).reshape(-1)
        self._check(np.array([ch]), np.array([bank]), np.array([row]))
        self._span(col_elem, v.size)
        arr = self.row_array(int(row), create=True)
        arr[ch, bank, col_elem:col_elem + v.size] = round_to(v, self.hw.pim.dtype)

    def write_rows(self, ch: np.ndarray, bank: np.ndarray, row: np.ndarray,
                   data: np.ndarray) -> None:
        """Write whole rows: ``data[i]`` goes to (ch[i], bank[i], row[i])."""
        ch, bank, row = (np.asarray(a, dtype=np.int64).reshape(-1) for a in (ch, bank, row))
        data = np.asarray(data, dtype=np.float32)
        n = ch.size
        widths = {self.hw.row_elems * self.hw.density(k) for k in self.hw.formats.weights}
        ok = data.ndim == 2 and data.shape[0] == n and \
            data.shape[1] in {self.hw.row_elems, *widths}
        if bank.size != n or row.size != n or not ok:
            raise SimError(
                f"write_rows needs index arrays of one length n and data of shape "
                f"(n, {self.hw.row_elems}) (or a format's denser row); got {ch.size}, "
                f"{bank.size}, {row.size} and {data.shape}"
            )
        self._check(ch, bank, row)
        data = round_to(data, self.hw.pim.dtype)
        uniq, inverse = np.unique(row, return_inverse=True)
        for k, r in enumerate(uniq):
            sel = inverse == k
            self.row_array(int(r), create=True)[ch[sel], bank[sel], :data.shape[1]] = data[sel]

    def read(self, ch: int, bank: int, row: int, col_elem: int, n: int) -> np.ndarray:
        """``n`` elements of one bank row from ``col_elem`` (float32; unwritten reads 0)."""
        self._check(np.array([ch]), np.array([bank]), np.array([row]))
        self._span(col_elem, n)
        arr = self._rows.get(int(row))
        if arr is None:
            return np.zeros(n, np.float32)
        return arr[ch, bank, col_elem:col_elem + n].copy()
