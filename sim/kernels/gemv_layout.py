"""GEMV lowering decisions (``GemvOpts``) and the numbers they resolve to (``GemvLayout``).

Vocabulary. Channels ``C`` split into ``k_split`` reduction slices of ``Co`` channels.
Each unit holds ``R`` accumulator "stripes" per pass and batch row: a stripe is one
register, i.e. 16 outputs (``dot``: one per register lane; ``bcast``: one per column
lane) or one output with 16 lane partials (``lane``). The input slice of ``Kc`` elements
is broadcast in tiles of ``T`` elements (``Br`` batch rows side by side in the global
buffer). A row holds ``Kr`` k-elements of one stripe (``Kr`` = row elements, or the
columns per row in ``bcast`` where a column holds 16 outputs at one k); a tile segment of
a stripe spans ``rps = T / Kr`` rows, or ``spr = Kr / T`` segments share one row.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

from ..errors import AutoschedError
from ..hardware import Hardware
from .base import ceil_div, round_up
from .gemv_rules import GEMV_RULES, LOOP_ORDERS, GemvShape, gemv_reasons, k_per_row

__all__ = ["LAYOUT_FIELDS", "GemvOpts", "GemvLayout", "LOOP_ORDERS", "layout_key", "parse_layout",
           "gemv_layout_of"]

# The options that decide where each weight lives in the banks (``place_gemv``): two
# schedules with equal values read the same resident weights. ``batch_rows`` and the
# loop order only change how the rows are walked.
LAYOUT_FIELDS = ("mode", "channels", "k_split", "gb_tile", "registers", "interleave",
                 "double_buffer")


@dataclass(frozen=True)
class GemvOpts:
    """Every GEMV lowering decision; ``None`` means the shipped default.

    mode: "dot" | "bcast" | "lane" (default dot with an adder tree, else bcast);
    channels: channels used (default all); k_split: reduction slices (1: output split,
    channels: pure k split, between: both); gb_tile: x elements per broadcast (default the
    whole buffer, halved until it is not larger than needed); registers: stripes per unit
    per pass (default enough for one pass, capped by the register file); batch_rows: batch
    rows MACed against each opened row; loop_order: "row_outer" (output passes outside the
    tile loop) or "tile_outer" (every pass's registers live across the tile loop);
    interleave: alternate even/odd banks of a bank-pair unit; double_buffer: two global
    buffer halves, the next tile written while the current one is used; row_prefetch:
    the pipelined row walk (interleaved bank pairs, row_outer): each row's activation
    issued inside the partner bank's MACs (``sim.kernels.gemv_pipeline``).
    """

    mode: str | None = None
    channels: int | None = None
    k_split: int = 1
    gb_tile: int | None = None
    registers: int | None = None
    batch_rows: int = 1
    loop_order: str = "row_outer"
    interleave: bool = False
    double_buffer: bool = False
    row_prefetch: bool = False

    def to_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def resolve(self, hw: Hardware, n: int, k: int, batch: int) -> GemvOpts:
        """These opts with every default filled in for the given shape."""
        mode = self.mode or ("dot" if hw.pim.adder_tree else "bcast")
        chans = self.channels or hw.org.channels
        o = replace(self, mode=mode, channels=chans)
        ks = max(self.k_split, 1)
        co = max(chans // ks, 1)
        opr = 1 if mode == "lane" else hw.pim.register_lanes
        need = ceil_div(n, co * hw.units_per_channel * opr)
        cap = hw.pim.registers // max(self.batch_rows, 1)
        regs = self.registers or max(1, min(need, cap))
        top = hw.gb_elems // max(self.batch_rows, 1) // (2 if self.double_buffer else 1)
        kr = k_per_row(mode, hw)
        if self.registers is None and mode != "dot" and 0 < top < kr and kr % top == 0:
            regs = max(1, min(cap, round_up(regs, kr // top)))  # fill the rows the tile packs
        tile = self.gb_tile
        if tile is None:
            tile = _default_tile(replace(o, registers=regs), hw, ceil_div(k, ks))
        return replace(o, registers=regs, gb_tile=tile)

    def validate(self, hw: Hardware, n: int, k: int, batch: int) -> list[str]:
        """Why these opts cannot lower ``y[batch, n] = x @ W[n, k]^T`` on ``hw`` (empty: ok)."""
        try:
            gemv_layout_of(hw, n, k, batch, self)
        except AutoschedError as e:
            return str(e).split("; ")
        return []


def layout_key(opts: GemvOpts) -> str:
    """Resolved ``opts``' layout as a short stable string, e.g. ``bcast.c64.k2.t256.r1.i1.d0``."""
    o = opts
    return (f"{o.mode}.c{o.channels}.k{o.k_split}.t{o.gb_tile}.r{o.registers}"
            f".i{int(o.interleave)}.d{int(o.double_buffer)}")


def parse_layout(key: str) -> dict:
    """The :data:`LAYOUT_FIELDS` values of a :func:`layout_key` string."""
    try:
        mode, c, k, t, r, i, d = key.split(".")
        assert c[0] == "c" and k[0] == "k" and t[0] == "t" and r[0] == "r"
        assert i[0] == "i" and d[0] == "d"
        return {"mode": mode, "channels": int(c[1:]), "k_split": int(k[1:]),
                "gb_tile": int(t[1:]), "registers": int(r[1:]), "interleave": i[1:] == "1",
                "double_buffer": d[1:] == "1"}
    except (ValueError, AssertionError, IndexError):
        raise AutoschedError(f"GEMV layout {key!r} is malformed: want "
                             "mode.c<channels>.k<k_split>.t<gb_tile>.r<registers>.i<0|1>.d<0|1>"
                             ) from None


def _default_tile(o: GemvOpts, hw: Hardware, kslice: int) -> int:
    """The largest valid tile filling the buffer, shrunk while half of it still covers k."""
    top = hw.gb_elems // max(o.batch_rows, 1) // (2 if o.double_buffer else 1)
    kr = k_per_row(o.mode, hw)
    cands = [kr * m for m in range(top // kr, 0, -1)]
    cands += [kr // d for d in range(2, kr + 1) if kr % d == 0 and kr // d <= top]
    shape = GemvShape(hw, 1, kslice, max(o.batch_rows, 1))
    fits = [r for r in GEMV_RULES if r.name in ("tile", "segments")]
    v = {**o.to_dict(), "registers": o.registers or 1}
    ok = [t for t in cands if all(r.check(shape, {**v, "gb_tile": t}) is None for r in fits)]
    if not ok:
        return top
    tile = ok[0]
    smaller = [t for t in ok if t >= kslice]
    return smaller[-1] if smaller else tile


@dataclass(frozen=True)
class GemvLayout:
    """Resolved GEMV geometry (see the module docstring for the symbols)."""

    n: int
    k: int
    batch: int
    opts: GemvOpts
    C: int
    ks: int
    Co: int
    U: int
    bpu: int
    R: int
    Br: int
    nbg: int
    P: int
    T: int
    Kc: int
    ntiles: int
    Kr: int
    g: int  # k-elements per column (lanes in dot/lane, 1 in bcast)
    segcols: int
    spr: int
    rps: int
    na: int
    nb: int
    opr: int  # outputs per register
    RL: int  # register lanes
    lanes: int

    @property
    def Bp(self) -> int:
        return self.nbg * self.Br

    @property
    def npad(self) -> int:
        return self.P * self.Co * self.U * self.R * self.opr

    @property
    def ktot(self) -> int:
        return self.ks * self.Kc

    @property
    def rpsb(self) -> int:
        """Rows of one segment in each bank (halved when bank pairs interleave)."""
        return self.rps // 2 if self.opts.interleave else self.rps

    @property
    def rows_per_bank(self) -> int:
        return self.P * self.ntiles * self.na * self.nb * self.rpsb

    @property
    def resident_input(self) -> bool:
        """The input slice is broadcast once per batch group and stays in the global
        buffer across the output passes: it is one tile and the passes walk outside it."""
        return self.ntiles == 1 and self.opts.loop_order == "row_outer" \
            and not self.opts.double_buffer

    @property
    def part_width(self) -> int:
        """Elements one k-slice reads out per pass and batch row: ``Co * U * R * RL``."""
        return self.Co * self.U * self.R * self.RL


def gemv_layout_of(hw: Hardware, n: int, k: int, batch: int, opts: GemvOpts | None) -> GemvLayout:
    """Resolve ``opts`` for the shape, or raise AutoschedError with the reasons of the
    first tier of :data:`~sim.kernels.gemv_rules.GEMV_RULES` that fails."""
    if min(n, k, batch) < 1:
        raise AutoschedError(f"gemv needs positive n, k, batch; got {n}, {k}, {batch}")
    o = (opts or GemvOpts()).resolve(hw, n, k, batch)
    why = gemv_reasons(GemvShape(hw, n, k, batch), o.to_dict())
    if why:
        raise AutoschedError("; ".join(why))
    p = hw.pim
    ks, br, t, r = o.k_split, o.batch_rows, o.gb_tile, o.registers
    co, u, kr = o.channels // ks, hw.units_per_channel, k_per_row(o.mode, hw)
    opr = 1 if o.mode == "lane" else p.register_lanes
    rps, spr = max(t // kr, 1), max(kr // t, 1)
    kc = round_up(ceil_div(k, ks), t * (2 if o.double_buffer else 1))
    g = 1 if o.mode == "bcast" else p.lanes
    na, nb = (r, p.register_lanes // spr) if o.mode == "dot" else (1, r // spr)
    return GemvLayout(n=n, k=k, batch=batch, opts=o, C=o.channels, ks=ks, Co=co, U=u,
                    bpu=p.banks_per_unit, R=r, Br=br, nbg=ceil_div(batch, br),
                    P=ceil_div(n, co * u * r * opr), T=t, Kc=kc, ntiles=kc // t, Kr=kr, g=g,
                    segcols=min(t, kr) // g, spr=spr, rps=rps, na=na, nb=nb, opr=opr,
                    RL=p.register_lanes, lanes=p.lanes)
