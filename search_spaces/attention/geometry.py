"""KV-cache layout of attention over a KV cache: where each cached position lives.

The one home of the layout: the attention space's constraints are the rules this plan
checks (:mod:`.rules`, which also derives the padded widths), and the code generator
(``autosched.families.attention``) lowers the plan.

Channels: ``batch_split * seq_split`` streams, stream ``k = bj * seq_split + si`` on
channels ``[k * kv_channels, (k + 1) * kv_channels)``; batch group ``bj`` holds the ``bpb = b /
batch_split`` sequences ``bi = bj * bpb + bl``. Channel ``ch`` of a stream serves kv heads
``g = gs * kv_channels + ch`` of each of its sequences, one "slot" ``sigma = bl * (kvh //
kv_channels) + gs`` at a time. Cache slots are dealt in
chunks: chunk ``c`` goes to stream ``c % seq_split``, pass ``c // seq_split``; position
``p`` lives in slot ``p % span`` (a ring when a sliding window is shorter than the
capacity), ``live = min(l, span)`` slots hold positions.

Three tensor layouts, each depending only on (b, q, kvh, d, capacity, window, schedule),
never on l (``L`` lanes per column, ``dk`` a position's elements padded to columns):

* ``kpim`` (K for scores on PIM): a pass gives unit ``u`` ``ppu`` positions in
  ``ceil(ppu / ppr)`` rows (``ppu`` fewer than a row holds when the cache is short:
  :func:`~.rules.k_fill`), position-major (a position's ``dk`` elements in ``dk / L``
  columns, ``ppr = E // dk`` per row). Register sets of ``pps`` positions ("subs") are
  read out in (sub, unit) order.
* ``vpim`` (V for the weighted sum on PIM): a position's ``dv = uv * cpp * L`` (padded)
  outputs are split over ``uv`` units (``cpp`` columns each); a pass gives a row of each
  unit ``chunk`` positions (a whole row's, ``columns / cpp``, or fewer when the cache is
  short: :meth:`~.rules.AttnShape.chunk_v`), column ``eb * chunk + pos`` holding the
  ``L`` outputs of e-block ``eb``. With ``v_groups`` ``G_v > 1`` the channel's units
  form ``G_v`` disjoint groups of ``uv`` (group ``g`` starting at bank ``g * gstep``):
  pass ``rho`` lives in group ``rho % G_v``, row ``rho // G_v`` of the slot, so one
  group's row activation overlaps another group's MACs.
* ``plain`` (K or V read by the host): ``ppr`` positions of ``dk`` elements per bank row,
  row-major, dealt over the banks of the channel, one row index per chunk of
  ``banks * ppr``.
"""

from __future__ import annotations

from dataclasses import dataclass

from sim.errors import AutoschedError
from sim.hardware import Hardware
from sim.kernels.base import ceil_div

from .rules import AttnShape, attention_reasons, k_fill, q_part, shape_reasons, stage_width

__all__ = ["AttnLayout", "Piece", "TensorLayout", "attention_shape", "attention_layout_of"]


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
    groups: int = 1  # unit groups the passes alternate over (vpim; 1: every pass the same)
    gstep: int = 0  # banks between the first units of consecutive groups

    @property
    def slot_rows(self) -> int:
        """Rows of one slot in each bank: a group's passes are stacked, the groups side
        by side."""
        return ceil_div(self.passes, self.groups) * self.rows_per_pass

    def rows(self, slots: int) -> int:
        return slots * self.slot_rows

    def at(self, rho: int) -> tuple[int, int]:
        """(first row within the slot, bank offset of its group) of pass ``rho``."""
        r, g = divmod(rho, self.groups)
        return r * self.rows_per_pass, g * self.gstep


@dataclass(frozen=True)
class AttnLayout:
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
    pps: int  # positions per register set (scores; fewer than k_regs hold when partly filled)
    ppu: int  # positions per unit per K pass
    uv: int  # units holding V
    cpp: int  # V columns per position per unit
    K: TensorLayout
    V: TensorLayout
    lanes: int = 16  # elements per column
    Bs: int = 1  # batch groups (streams per sequence split)
    dk: int = 0  # a position's elements padded to whole columns (q, K, plain V)
    dv: int = 0  # V elements per position as laid out (vpim: uv * cpp * lanes; plain: dk)
    span: int = 0  # cache slots
    window: int = 0  # sliding window (0: none)
    scale: float = 0.0  # score scale
    vsplit: int = 1  # columns of a V pass's MACs that cover the previous group's precharge
    qpart: int = 0  # elements of a query row per global-buffer load (< dk: loaded in parts)
    stages: int = 1  # softmax stages asked for (softmax_stages)
    stage_w: int = 0  # cache slots per stage (rules.stage_width)

    @property
    def live(self) -> int:
        """Slots holding a position."""
        return min(self.l, self.span)

    @property
    def cols(self) -> int:
        """Columns of one position (K)."""
        return self.dk // self.lanes

    def buf(self, name: str) -> str:
        """The host buffer holding ``q``, ``k``, ``v`` or the result ``y`` as the layout
        reads or writes it: the padded copy (``qp``, ``kp``, ``vp``, ``yv``) when a head
        is padded."""
        padded = self.dk != self.d if name in ("q", "k") else self.dv != self.d
        return {"q": "qp", "k": "kp", "v": "vp", "y": "yv"}[name] if padded else name

    def width(self, name: str) -> int:
        """Elements per head row of ``buf(name)``."""
        return self.dk if name in ("q", "k") else self.dv

    @property
    def own(self) -> bool:
        """Whether the host multiplies with the step's own k and v: every position is new
        (a prompt from an empty cache) and both products run on the host, so the banks
        only store the cache and nothing is read back."""
        return self.q == self.l and self.scores == "host" and self.wsum == "host"

    @property
    def bpb(self) -> int:
        """Sequences of one batch group."""
        return self.b // self.Bs

    @property
    def streams(self) -> int:
        """PIM streams: one per (batch group, sequence split)."""
        return self.Bs * self.S

    @property
    def slots(self) -> int:
        """Slots of one channel: its group's sequences times its kv heads."""
        return self.bpb * (self.kvh // self.kc)

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
    def vunits_step(self) -> int:
        """Bank step over the units of every V group together (0: one unit in all)."""
        n = self.uv * self.V.groups
        return self.bpu * (self.U // n) if n > 1 else 0

    @property
    def vparts(self) -> int:
        """Partial outputs of the weighted sum the host adds up: one per sequence split
        and V group (1: the units' sums are the result)."""
        return self.S * self.V.groups

    @property
    def lp(self) -> int:
        """Padded slot count of the host-side score rows."""
        return max(ceil_div(self.live, t.chunk) * t.chunk for t in (self.K, self.V))

    @property
    def nst(self) -> int:
        """Softmax stages holding live slots (1: the whole-row softmax)."""
        return 1 if self.stages == 1 else min(self.stages, ceil_div(self.live, self.stage_w))

    @property
    def bounds(self) -> tuple[int, ...]:
        """Score columns where the stages start, and the row's end (``lp``)."""
        return (*(st * self.stage_w for st in range(self.nst)), self.lp)

    @property
    def partials(self) -> int:
        """Partial outputs of the weighted sum the host adds up: per stage, one per
        sequence split and V group (1: the units' sums are the result)."""
        return self.vparts * self.nst

    def passes_of(self, t: TensorLayout, si: int) -> int:
        """Passes stream ``si`` runs for the live slots."""
        n = ceil_div(self.live, t.chunk)
        return max(0, ceil_div(n - si, self.S))

    def owner(self, t: TensorLayout, p: int) -> tuple[int, int, int]:
        """(stream, pass, slot within the pass's chunk) of position ``p``."""
        slot = p % self.span
        c = slot // t.chunk
        return c % self.S, c // self.S, slot % t.chunk

    def pieces(self, t: TensorLayout, x: int) -> list[Piece]:
        """Where slot ``x`` of a pass's chunk lives (rows relative to the pass)."""
        dc, lanes = self.cols, self.lanes
        if t.kind == "kpim":
            k, rest = divmod(x, self.U * self.pps)
            u, w = divmod(rest, self.pps)
            y = k * self.pps + w
            return [Piece(u * self.bpu, y // self.ppr, (y % self.ppr) * dc, 0, dc)]
        if t.kind == "vpim":  # group 0's units: add the pass's group offset (TensorLayout.at)
            return [Piece(uv * self.vstep, 0, eb * t.chunk + x, (uv * self.cpp + eb) * lanes, 1)
                    for uv in range(self.uv) for eb in range(self.cpp)]
        bank, r = divmod(x, self.ppr)
        return [Piece(bank, 0, r * dc, 0, dc)]


def _layout(kind: str, chunk: int, rpp: int, span: int, S: int, base: int,
            groups: int = 1, gstep: int = 0) -> TensorLayout:
    return TensorLayout(kind, chunk, rpp, ceil_div(ceil_div(span, chunk), S), base, groups,
                        gstep)


def attention_shape(w_dims: dict[str, int], cap: int, hw: Hardware,
                    window: int = 0) -> AttnShape:
    """The rules' view of a workload's dims with ``cap`` positions reserved."""
    return AttnShape(hw, *(w_dims[k] for k in ("b", "q", "h", "kvh", "d")), cap, window)


def attention_layout_of(w_dims: dict[str, int], cap: int, point: dict, hw: Hardware,
                   window: int = 0, scale: float | None = None) -> AttnLayout:
    """Resolve a point, or raise AutoschedError naming every rule it breaks."""
    sh = attention_shape(w_dims, cap, hw, window)
    why = shape_reasons(sh, w_dims["l"]) or attention_reasons(sh, point)
    if why:
        raise AutoschedError("; ".join(why))
    b, q, h, kvh, d, n = (w_dims[k] for k in ("b", "q", "h", "kvh", "d", "l"))
    E, U, lanes = hw.row_elems, hw.units_per_channel, sh.lanes
    ppr, dot = sh.ppr, point.get("k_mode") == "dot"
    rpq = point.get("k_regs", 1)
    pps = rpq * (lanes if dot else 1)
    ppu = k_fill(sh, point) if point["scores"] == "pim" else max(pps, ppr)
    pps = min(pps, ppu)  # a short cache's register set, filled partly
    S, nb, span = point["seq_split"], hw.org.banks_per_channel, sh.span
    if point["scores"] == "pim":
        K = _layout("kpim", U * ppu, ceil_div(ppu, ppr), span, S, 0)
    else:
        K = _layout("plain", sh.plain, 1, span, S, 0)
    Bs = point.get("batch_split", 1)
    slots = b // Bs * (kvh // point["kv_channels"])
    vbase = K.rows(slots)
    uv, cpp = sh.uv(point), sh.cpp(point)
    if point["wsum"] == "pim":
        vg = sh.v_groups(point)
        V = _layout("vpim", sh.chunk_v(point), 1, span, S, vbase, vg,
                    hw.pim.banks_per_unit * (U // (uv * vg)))
        dv = uv * cpp * lanes
    else:
        V, dv = _layout("plain", sh.plain, 1, span, S, vbase), sh.dk
    return AttnLayout(b=b, q=q, h=h, kvh=kvh, d=d, l=n, cap=cap, G=h // kvh,
                    kc=point["kv_channels"], S=S, scores=point["scores"],
                    k_mode=point.get("k_mode", ""), rpq=rpq, qk=point.get("k_qrows", 1),
                    wsum=point["wsum"], qv=point.get("v_qrows", 1), U=U,
                    bpu=hw.pim.banks_per_unit, NB=nb, bg=hw.org.bank_groups, E=E,
                    cpr=hw.columns_per_row, ppr=ppr, pps=pps, ppu=ppu, uv=uv, cpp=cpp,
                    K=K, V=V, lanes=lanes, Bs=Bs, dk=sh.dk, dv=dv, span=span, window=window,
                    scale=scale if scale is not None else d ** -0.5,
                    vsplit=ceil_div(round(hw.timing.trp * hw.org.tck_ns * 1000),
                                    round(hw.pim_column_ns * 1000)),
                    qpart=q_part(sh, point.get("k_qrows", 1)),
                    stages=point.get("softmax_stages", 1),
                    stage_w=stage_width(sh, point) if point.get("softmax_stages", 1) > 1 else 0)
