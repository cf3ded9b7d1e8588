"""GEMV on the PIM units: ``y[batch, n] = x[batch, k] @ W[n, k]^T``.

One SPMD PIM stream per reduction slice (``ch`` = channel position in the slice) and a
host stream that waits for every slice and then, in one host op, reduces register lanes
(``lane`` mode) and slices (``k_split``), strips the padding and applies the epilogue.
Weights are laid out by :func:`place_gemv` exactly as the loops in :func:`_stream` walk
them; the layout depends only on the plan, never on the loop order.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from functools import lru_cache, partial

import numpy as np

from ..hardware import Hardware
from ..isa import Act, Affine, BufRef, ClrAcc, Mac, Pre, RdAcc, Signal, Wait, WrGb, aff
from ..program import Buffer, Node, Program, Stream
from .base import Kernel, affine_sum, loop, loop_nest, pad_to, shift_refs
from .epilogue import NO_EPILOGUE, Epilogue
from .gemv_layout import GemvLayout, GemvOpts, gemv_layout_of
from .gemv_pipeline import WrGbFn, head_columns, pipelined_tiles

__all__ = ["gemv", "place_gemv", "plan_from_json", "plan_json", "unpack_layout"]


def _index_maps(pl: GemvLayout) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per channel: flat row-data position, local output index and local k of every element.

    The data of one channel is ``[U * nh banks, rows_per_bank, row_elems]`` in bank-slot
    order (``nh`` = 2 halves when interleaving). Channel ``co`` of slice ``kk`` adds
    ``co * U * R * opr`` to the output index and ``kk * Kc`` to k.
    """
    nh = 2 if pl.opts.interleave else 1
    dims = (pl.U, pl.P, pl.ntiles, pl.na, pl.nb, pl.rpsb, nh, pl.spr, pl.segcols, pl.lanes)
    u, p, t, a, bb, qb, h, c, cc, e = np.ix_(*(np.arange(d) for d in dims))
    q = qb * nh + h
    if pl.opts.mode == "dot":
        r, j = a, bb * pl.spr + c
    else:
        r, j = bb * pl.spr + c, (e if pl.opts.mode == "bcast" else 0)
    o = p * (pl.Co * pl.U * pl.R * pl.opr) + (u * pl.R + r) * pl.opr + j
    kin = cc if pl.g == 1 else cc * pl.g + e
    k = t * pl.T + q * pl.Kr + kin
    row = (((p * pl.ntiles + t) * pl.na + a) * pl.nb + bb) * pl.rpsb + qb
    pos = (c * pl.segcols + cc) * pl.lanes + e
    slot = u * nh + h
    flat = (slot * pl.rows_per_bank + row) * (pl.spr * pl.segcols * pl.lanes) + pos
    shape = np.broadcast_shapes(flat.shape, o.shape, k.shape)
    return tuple(np.broadcast_to(x, shape).reshape(-1) for x in (flat, o, k))


def place_gemv(pl: GemvLayout, mem, tensors: dict[str, np.ndarray]) -> None:
    """Write ``tensors["W"]`` ``[n, k]`` (zero-padded) into the banks of every used channel."""
    w = np.asarray(tensors["W"], dtype=np.float32)
    wp = pad_to(w, (pl.npad, pl.ktot))
    flat, o_loc, k_loc = _index_maps(pl)
    nh = 2 if pl.opts.interleave else 1
    row_elems = pl.spr * pl.segcols * pl.lanes
    nslots = pl.U * nh
    slot = np.arange(nslots)
    banks = np.repeat((slot // nh) * pl.bpu + slot % nh, pl.rows_per_bank)
    rows = np.tile(np.arange(pl.rows_per_bank), nslots)
    data = np.zeros(nslots * pl.rows_per_bank * row_elems, np.float32)
    for kk in range(pl.ks):
        for co in range(pl.Co):
            data[flat] = wp[o_loc + co * pl.U * pl.R * pl.opr, k_loc + kk * pl.Kc]
            ch = np.full(banks.size, kk * pl.Co + co)
            mem.write_rows(ch, banks, rows, data.reshape(-1, row_elems))


def plan_json(pl: GemvLayout) -> str:
    """The plan as a JSON string (a host op attribute)."""
    return json.dumps(asdict(pl), sort_keys=True, separators=(",", ":"))


def plan_from_json(text: str) -> GemvLayout:
    d = json.loads(text)
    return GemvLayout(**{**d, "opts": GemvOpts(**d["opts"])})


@lru_cache(maxsize=64)
def _unpack_index(text: str) -> tuple[np.ndarray, np.ndarray]:
    """Flat positions into the per-channel data, and into ``W [npad, ktot]``, of every
    element the layout of plan ``text`` holds."""
    pl = plan_from_json(text)
    flat, o_loc, k_loc = _index_maps(pl)
    per_ch = pl.U * (2 if pl.opts.interleave else 1) * pl.rows_per_bank * pl.spr * \
        pl.segcols * pl.lanes
    src, dst = [], []
    for kk in range(pl.ks):
        for co in range(pl.Co):
            src.append(flat + (kk * pl.Co + co) * per_ch)
            dst.append((o_loc + co * pl.U * pl.R * pl.opr) * pl.ktot + k_loc + kk * pl.Kc)
    return np.concatenate(src), np.concatenate(dst)


def unpack_layout(text: str, data: np.ndarray) -> np.ndarray:
    """``W [npad, ktot]`` from the rows of every bank the layout of plan ``text`` uses,
    ``data [C, slots, rows, row elements]`` (the inverse of :func:`place_gemv`)."""
    pl = plan_from_json(text)
    src, dst = _unpack_index(text)
    w = np.zeros(pl.npad * pl.ktot, np.float32)
    w[dst] = np.asarray(data, np.float32).reshape(-1)[src]
    return w.reshape(pl.npad, pl.ktot)


def _wrgb(pl: GemvLayout, kk: int, t: Affine, half: int) -> list[Node]:
    src = affine_sum(aff(kk * pl.Kc), aff(0, bg=pl.Br * pl.ktot, b=pl.ktot),
                     aff(0, **{v: s * pl.T for v, s in t.terms}), t.base * pl.T)
    return loop("b", pl.Br, (WrGb(BufRef("x", src, (pl.T,)), aff(half, b=pl.T)),))


def _macs(pl: GemvLayout, bank: int, q: Affine, half: int) -> list[Node]:
    """MACs of one open row: ``spr`` segments against each of ``Br`` batch tiles."""
    tile_outer = pl.opts.loop_order == "tile_outer"
    rb = pl.P * pl.R if tile_outer else pl.R
    if pl.opts.mode == "dot":
        reg, lane = aff(0, a=1), aff(0, bb=pl.spr, c=1)
    else:
        reg, lane = aff(0, bb=pl.spr, c=1), aff(0)
    reg = affine_sum(reg, b=rb, p=pl.R if tile_outer else 0)
    gb = affine_sum(half, aff(0, **{v: s * pl.Kr for v, s in q.terms}), q.base * pl.Kr, b=pl.T)
    mac = Mac(bank, pl.bpu, aff(0, c=pl.segcols), pl.segcols, gb, reg, pl.opts.mode, lane)
    return loop_nest((("c", pl.spr), ("b", pl.Br)), (mac,))


def _rows(pl: GemvLayout, t: Affine, half: int) -> list[Node]:
    """Activate, MAC and precharge every row of tile ``t`` (all passes if tile-outer)."""
    per_t = pl.na * pl.nb * pl.rpsb
    row = affine_sum(aff(0, **{v: s * per_t for v, s in t.terms}), t.base * per_t,
                     p=pl.ntiles * per_t, a=pl.nb * pl.rpsb, bb=pl.rpsb, qb=1)
    if pl.opts.interleave:
        body: tuple[Node, ...] = (
            Act(0, 2, row), Act(1, 2, row),
            *_macs(pl, 0, aff(0, qb=2), half), Pre(0, 2),
            *_macs(pl, 1, aff(1, qb=2), half), Pre(1, 2),
        )
    else:
        body = (Act(0, pl.bpu, row), *_macs(pl, 0, aff(0, qb=1), half), Pre(0, pl.bpu))
    nest = (("a", pl.na), ("bb", pl.nb), ("qb", pl.rpsb))
    if pl.opts.loop_order == "tile_outer":
        nest = (("p", pl.P), *nest)
    return loop_nest(nest, body)


def _no_wrgb(pl: GemvLayout, kk: int, t: Affine, half: int) -> list[Node]:
    return []


def _tiles(pl: GemvLayout, kk: int, head: int = 0, wrgb: WrGbFn = _wrgb) -> list[Node]:
    """The tile loop; with double buffering, software-pipelined over two buffer halves;
    with ``row_prefetch``, the pipelined row walk (:mod:`.gemv_pipeline`). ``wrgb``
    broadcasts a tile of one pass (a no-op where the caller broadcast a resident input
    before the passes)."""
    if pl.opts.row_prefetch:
        return pipelined_tiles(pl, kk, head, wrgb)
    if not pl.opts.double_buffer:
        t = aff(0, t=1)
        return loop("t", pl.ntiles, (*wrgb(pl, kk, t, 0), *_rows(pl, t, 0)))
    hb, m = _half_offset(pl), pl.ntiles // 2
    out: list[Node] = _wrgb(pl, kk, aff(0), 0)
    steady = (*_wrgb(pl, kk, aff(1, t2=2), hb), *_rows(pl, aff(0, t2=2), 0),
              *_wrgb(pl, kk, aff(2, t2=2), 0), *_rows(pl, aff(1, t2=2), hb))
    if m > 1:
        out += loop("t2", m - 1, steady)
    last = pl.ntiles - 2
    out += [*_wrgb(pl, kk, aff(last + 1), hb), *_rows(pl, aff(last), 0),
            *_rows(pl, aff(last + 1), hb)]
    return out


def _half_offset(pl: GemvLayout) -> int:
    """Offset of the second global-buffer half (double buffering)."""
    return pl.Br * pl.T


def _stream(pl: GemvLayout, kk: int, head: int = 0) -> Stream:
    """The PIM stream of reduction slice ``kk``."""
    w = pl.part_width
    urr = pl.U * pl.R * pl.RL
    dst_off = aff(kk * w, bg=pl.Br * pl.P * pl.ks * w, b=pl.P * pl.ks * w, p=pl.ks * w, ch=urr)
    rd = RdAcc(0, pl.bpu, aff(0, b=pl.R) if pl.opts.loop_order == "row_outer"
               else aff(0, b=pl.P * pl.R, p=pl.R), pl.R, BufRef("part", dst_off, (urr,)))
    if pl.opts.loop_order == "row_outer":
        # a resident input (GemvLayout.resident_input) is broadcast once, before the passes
        res = pl.resident_input
        tiles = _tiles(pl, kk, head, _no_wrgb if res else _wrgb)
        body = [*(_wrgb(pl, kk, aff(0), 0) if res else ()), *loop("p", pl.P, (
            ClrAcc(0, pl.bpu, aff(0), pl.Br * pl.R), *tiles, *loop("b", pl.Br, (rd,))))]
    else:
        body = [ClrAcc(0, pl.bpu, aff(0), pl.Br * pl.P * pl.R), *_tiles(pl, kk),
                *loop_nest((("b", pl.Br), ("p", pl.P)), (rd,))]
    chans = tuple(range(kk * pl.Co, (kk + 1) * pl.Co))
    return Stream(f"pim{kk}", "pim", chans, (*loop("bg", pl.nbg, body), Signal(f"gemv{kk}")))


def _slice_streams(pl: GemvLayout, head: int = 0) -> tuple[Stream, ...]:
    """The streams of every reduction slice: slice 0 built, the others the same body with
    their input slice and partial-sum columns shifted (what :func:`_stream` would build)."""
    first = _stream(pl, 0, head)
    out = [first]
    for kk in range(1, pl.ks):
        body = shift_refs(first.body[:-1], {"x": kk * pl.Kc, "part": kk * pl.part_width})
        out.append(Stream(f"pim{kk}", "pim", tuple(range(kk * pl.Co, (kk + 1) * pl.Co)),
                          (*body, Signal(f"gemv{kk}"))))
    return tuple(out)


def _host(pl: GemvLayout, epilogue: Epilogue) -> tuple[Stream, list[Buffer]]:
    """Wait for every slice, then one ``gemv_out`` host op: reduce lanes and slices,
    strip the padding, apply the epilogue, write ``y``."""
    bp, w = pl.Bp, pl.part_width
    shape = (bp, pl.P, pl.ks, w // pl.RL, pl.RL) if pl.opts.mode == "lane" else \
        (bp, pl.P, pl.ks, w)
    op, bufs = epilogue.op("gemv_out", (BufRef("part", aff(0), shape),), pl.batch, pl.n,
                           (("n", pl.n),))
    body = (Wait(tuple(f"gemv{kk}" for kk in range(pl.ks))), op)
    part = Buffer("part", "fp32", bp * pl.P * pl.ks * w)
    return Stream("host", "host", (), body), [part, *bufs]


def gemv(hw: Hardware, n: int, k: int, batch: int = 1, opts: GemvOpts | None = None, *,
         epilogue: Epilogue = NO_EPILOGUE) -> Kernel:
    """The PIM GEMV kernel; tensors ``{"x": [batch, k], "W": [n, k]}``, output ``y``
    ``[batch, n]``.

    ``epilogue``: the stages (:class:`~sim.kernels.epilogue.Epilogue`, with their inputs
    after ``x``) the host applies in the same op that reduces the partial sums. Raises
    AutoschedError listing every reason when ``opts`` cannot work for the shape.
    """
    pl = gemv_layout_of(hw, n, k, batch, opts)
    host, bufs = _host(pl, epilogue)
    x = Buffer("x", hw.pim.dtype, pl.Bp * pl.ktot)
    streams = (*_slice_streams(pl, head_columns(hw)), host)
    prog = Program(streams, (x, *bufs), name=f"gemv_{n}x{k}_b{batch}_{pl.opts.mode}")
    shapes = epilogue.shapes(batch, n)
    return Kernel(prog, ("x", *epilogue.inputs()), "y", epilogue.out_shape(batch, n),
                  partial(place_gemv, pl), input_shapes=((batch, k), *shapes),
                  padded_shapes=((pl.Bp, pl.ktot), *shapes))
