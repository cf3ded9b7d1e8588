"""Writing cached keys and values into the banks from the host, in the kernel's layout.

The attention kernel writes each step's new tokens itself; when positions were computed
elsewhere (a prompt run eagerly by ``transformers`` before a compiled decode step),
:func:`load_cache` puts them where the kernel will read them: position ``p`` of kv head
``g`` in batch row ``bi`` goes to the slot, stream, channel, bank, row and columns the
plan assigns (:meth:`AttnLayout.owner`, :meth:`AttnLayout.pieces`; the batch group's
streams for its sequences), padding lanes zero.
"""

from __future__ import annotations

import numpy as np

from search_spaces.attention import AttnLayout

__all__ = ["load_cache"]


def load_cache(pl: AttnLayout, mem: object, base_row: int, keys: np.ndarray,
               values: np.ndarray, positions: list[int]) -> None:
    """Write ``keys``/``values`` ``[b, kvh, len(positions), d]`` of absolute ``positions``
    into ``mem`` (a ``DeviceMemory``), the kernel's rows starting at ``base_row``."""
    b, kvh = pl.b, pl.kvh
    per_gs = pl.kvh // pl.kc
    for name, t, arr in (("k", pl.K, keys), ("v", pl.V, values)):
        width = pl.width(name)
        padded = np.zeros((b, kvh, len(positions), width), np.float32)
        padded[..., : pl.d] = arr
        slot_rows = t.slot_rows
        for j, p in enumerate(positions):
            si, rho, x = pl.owner(t, p)
            pieces = pl.pieces(t, x)
            prow, shift = t.at(rho)
            for bi in range(b):
                bj, bl = divmod(bi, pl.bpb)
                for g in range(kvh):
                    gs, ch = divmod(g, pl.kc)
                    row0 = base_row + t.base + (bl * per_gs + gs) * slot_rows + prow
                    vec = padded[bi, g, j]
                    chan = (bj * pl.S + si) * pl.kc + ch
                    for pc in pieces:
                        mem.write(chan, pc.bank + shift, row0 + pc.row, pc.col * pl.lanes,
                                  vec[pc.elem: pc.elem + pc.ncols * pl.lanes])
