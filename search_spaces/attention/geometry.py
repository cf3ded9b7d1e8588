"""KV-cache layout of attention over a KV cache: where each cached position lives.

The one home of the layout: the attention space's constraints are the rules this plan
checks (:mod:`.rules`), and the code generator (``autosched.codegen.families.attention``)
lowers the plan.

Channels: ``seq_split`` streams ``si`` of ``kv_channels`` channels each; channel ``ch`` of
a stream serves kv heads ``g = gs * kv_channels + ch`` for every batch row ``bi``, one
"slot" ``sigma = bi * (kvh // kv_channels) + gs`` at a time. Positions are dealt in
chunks: chunk ``c`` goes to stream ``c % seq_split``, pass ``c // seq_split``.

Three tensor layouts, each depending only on (b, kvh, d, capacity, schedule), never on l:

* ``kpim`` (K for scores on PIM): a pass gives unit ``u`` ``ppu`` positions in
  ``ppu / ppr`` rows, position-major (a position's ``d`` elements in ``d / 16`` columns).
  Register sets of ``pps`` positions ("subs") are read out in (sub, unit) order.
* ``vpim`` (V for the weighted sum on PIM): a position's ``d`` outputs are split over
  ``uv`` units (``cpp`` columns each); a row of a unit holds ``ppr_v`` positions, column
  ``eb * ppr_v + pos`` holding 16 outputs of e-block ``eb``.
* ``plain`` (K or V read by the host): row-major ``[position, d]`` dealt in row-sized
  chunks over the banks of the channel, one row index per chunk of ``banks * E / d``.
"""

from __future__ import annotations

from dataclasses import dataclass

from sim.errors import AutoschedError
from sim.hardware import Hardware
from sim.kernels.base import ceil_div

from .rules import AttnShape, attention_reasons, shape_reasons

__all__ = ["AttnPlan", "Piece", "TensorLayout", "attention_shape", "plan_attention"]


@dataclass(frozen=True)
class Piece:
    """A run of one cached position's elements: bank, row in the slot, column, elements."""

    bank: int
    row: int
    col: int
    elem: int  # first element of the position's d-vector in this run
    ncols: int


@dataclass(frozen=True)
class TensorLayout:
    """One cached tensor's geometry in a channel (see the module docstring)."""

    kind: str  # kpim | vpim | plain
    chunk: int  # positions per pass per channel
    rows_per_pass: int
    passes: int  # passes per slot reserved for the capacity
    base: int  # first row of the tensor's region

    def rows(self, slots: int) -> int:
        return slots * self.passes * self.rows_per_pass


@dataclass(frozen=True)
class AttnPlan:
    """Everything the lowering derives from (workload, point, hardware)."""

    b: int
    q: int
    h: int
    kvh: int
    d: int
    l: int  # noqa: E741 (the workload's dim name)
    cap: int
    G: int
    kc: int
    S: int
    scores: str
    k_mode: str
    rpq: int  # registers per query row (scores)
    qk: int  # query rows sharing an activated K row
    wsum: str
    qv: int  # query rows sharing an activated V row
    U: int
    bpu: int
    NB: int
    bg: int  # bank groups
    E: int
    cpr: int
    ppr: int  # positions per row in position-major layouts (E / d)
    pps: int  # positions per register set (scores)
    ppu: int  # positions per unit per K pass
    uv: int  # units holding V
    cpp: int  # V columns per position per unit
    K: TensorLayout
    V: TensorLayout

    @property
    def slots(self) -> int:
        return self.b * (self.kvh // self.kc)

    @property
    def rows(self) -> int:
        return self.V.base + self.V.rows(self.slots)

    @property
    def vstep(self) -> int:
        """Bank step of the V units (every ``U / uv``-th unit); 0 when only the first unit
        holds V, since a step reaching past the last bank is written as a single bank."""
        step = self.bpu * (self.U // self.uv)
        return step if step < self.NB else 0

    @property
    def lp(self) -> int:
        """Padded position count of the host-side score rows."""
        return max(ceil_div(self.l, t.chunk) * t.chunk for t in (self.K, self.V))

    def passes_of(self, t: TensorLayout, si: int) -> int:
        """Passes stream ``si`` runs for the ``l`` live positions."""
        n = ceil_div(self.l, t.chunk)
        return max(0, ceil_div(n - si, self.S))

    def owner(self, t: TensorLayout, p: int) -> tuple[int, int, int]:
        """(stream, pass, position within the pass's chunk) of position ``p``."""
        c = p // t.chunk
        return c % self.S, c // self.S, p % t.chunk

    def pieces(self, t: TensorLayout, x: int) -> list[Piece]:
        """Where position ``x`` of a pass's chunk lives (rows relative to the pass)."""
        dc = self.d // 16
        if t.kind == "kpim":
            k, rest = divmod(x, self.U * self.pps)
            u, w = divmod(rest, self.pps)
            y = k * self.pps + w
            return [Piece(u * self.bpu, y // self.ppr, (y % self.ppr) * dc, 0, dc)]
        if t.kind == "vpim":
            ppr_v = self.cpr // self.cpp
            return [Piece(uv * self.vstep, 0, eb * ppr_v + x, (uv * self.cpp + eb) * 16, 1)
                    for uv in range(self.uv) for eb in range(self.cpp)]
        bank, r = divmod(x * self.d, self.E)
        return [Piece(bank, 0, r // 16, 0, dc)]


def _layout(kind: str, chunk: int, rpp: int, cap: int, S: int, base: int) -> TensorLayout:
    return TensorLayout(kind, chunk, rpp, ceil_div(ceil_div(cap, chunk), S), base)


def attention_shape(w_dims: dict[str, int], cap: int, hw: Hardware) -> AttnShape:
    """The rules' view of a workload's dims with ``cap`` positions reserved."""
    return AttnShape(hw, *(w_dims[k] for k in ("b", "q", "h", "kvh", "d")), cap)


def plan_attention(w_dims: dict[str, int], cap: int, point: dict, hw: Hardware) -> AttnPlan:
    """Resolve a point, or raise AutoschedError naming every rule it breaks."""
    sh = attention_shape(w_dims, cap, hw)
    why = shape_reasons(sh, w_dims["l"]) or attention_reasons(sh, point)
    if why:
        raise AutoschedError("; ".join(why))
    b, q, h, kvh, d, n = (w_dims[k] for k in ("b", "q", "h", "kvh", "d", "l"))
    E, U = hw.row_elems, hw.units_per_channel
    ppr, dot = sh.ppr, point.get("k_mode") == "dot"
    rpq = point.get("k_regs", 1)
    pps = rpq * (16 if dot else 1)
    ppu = max(pps, ppr)
    S, nb = point["seq_split"], hw.org.banks_per_channel
    if point["scores"] == "pim":
        K = _layout("kpim", U * ppu, ppu // ppr, cap, S, 0)
    else:
        K = _layout("plain", sh.plain, 1, cap, S, 0)
    slots = b * (kvh // point["kv_channels"])
    vbase = K.rows(slots)
    if point["wsum"] == "pim":
        V = _layout("vpim", sh.chunk_v, 1, cap, S, vbase)
    else:
        V = _layout("plain", sh.plain, 1, cap, S, vbase)
    return AttnPlan(b=b, q=q, h=h, kvh=kvh, d=d, l=n, cap=cap, G=h // kvh,
                    kc=point["kv_channels"], S=S, scores=point["scores"],
                    k_mode=point.get("k_mode", ""), rpq=rpq, qk=point.get("k_qrows", 1),
                    wsum=point["wsum"], qv=point.get("v_qrows", 1), U=U,
                    bpu=hw.pim.banks_per_unit, NB=nb, bg=hw.org.bank_groups, E=E,
                    cpr=hw.columns_per_row, ppr=ppr, pps=pps, ppu=ppu, uv=sh.uv, cpp=sh.cpp,
                    K=K, V=V)
