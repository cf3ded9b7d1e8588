"""The schedule space of attention over a KV cache (workload family ``attention``).

Parameters (every domain depends on b, q, h, kvh, d, the capacity and the hardware, never
on the context length l, so one schedule serves every decoding step):

* ``kv_channels``: kv heads served side by side by one stream's channels (the rest are
  looped); ``seq_split``: streams the sequence is dealt over, in chunks (KV placement by
  head, by sequence blocks, or both); ``batch_split`` (only when ``b > 1``): groups of
  streams the batch's sequences are dealt over, ``b / batch_split`` consecutive sequences
  each (a short cache of many sequences fills the channels this way, where a sequence
  split leaves streams without a chunk). Channels used: the product of the three.
* ``scores`` (q k^T) on ``pim`` or ``host``; on PIM: ``k_mode`` ``dot`` (adder tree, 16
  positions per register) or ``lane`` (16 lane partials per position, summed on the host),
  ``k_regs`` registers per query row, ``k_qrows`` query rows MACed against each activated
  K row (GQA: the query heads of one kv head reuse the row; prefill adds tokens). When
  ``k_qrows`` heads overflow the global buffer (hbm-pim's 128 elements: a head of 256,
  or two of 128), each activated K row takes the query in parts of whole columns, one
  load per part (register sets then cover whole rows: rule ``k_parts``).
* ``wsum`` (p v) on ``pim`` or ``host``; on PIM ``v_qrows`` query rows per activated V row,
  and, where a channel has more units than V needs, ``v_groups``: disjoint groups of V
  units that take the passes in turn, each activating its next row while another MACs
  (the partial sums of the groups are added on the host); ``softmax_stages``: the cache
  slots in that many stages (:func:`~.rules.stage_width`), the host's softmax of one
  stage running while the banks score the next and weigh the one before (each stage
  normalised by its own maximum and sum, the stages' partial outputs merged by their
  weights at the end: the whole-row softmax, as in split-softmax decoding).
* Only for head dims that are not a power-of-two number of columns (e.g. 80, 96, or 100
  padded to 112): ``head_pad``, the one value of ``dk`` (a position's elements padded to
  whole columns; stated in every schedule of such a workload), and ``v_units``, the units
  of a channel holding V (fewer units pad less, more units work in parallel).

Softmax always runs on the host: it needs a max and a sum over every position of a row,
which live in different banks and channels, and the units have no exp. Attribute
``capacity`` of the workload (default l) is the number of KV positions reserved, attr
``window`` a sliding window (the cache then keeps ``min(capacity, window)`` slots when
decoding), attr ``scale`` the score scale when it is not ``1/sqrt(d)``. The
constraints are the layout's own rules (:mod:`.rules`, checked again by
:func:`~.geometry.attention_layout_of`), so the space holds exactly the points the code
generator lays out.
"""

from __future__ import annotations

from search_spaces.attention.geometry import attention_shape
from search_spaces.attention.rules import (
    ATTN_RULES,
    AttnShape,
    k_parts,
    k_set,
    shape_reasons,
    unit_share,
)
from search_spaces.constraints import Rule
from search_spaces.domains import Categorical, Divisors, PowersOfTwo
from search_spaces.errors import SpaceError
from search_spaces.params import Cond, Param
from search_spaces.space import Space
from search_spaces.workload import Workload
from sim.errors import AutoschedError
from sim.hardware import Hardware
from sim.kernels.base import ceil_div

__all__ = ["VERSION", "attention_default", "attention_space", "capacity_of", "qrow_options",
           "shape_of"]

# 3: a V pass of a short cache gives every stream of the sequence split a share
# 4: so does a K pass, filling a register set partly
# 5: v_groups, V passes alternating over groups of units
# 6: scores on PIM for a query larger than the global buffer (loaded in parts)
# 7: softmax_stages, the host's softmax pipelined with the banks' products
VERSION = 7


def capacity_of(workload: Workload) -> int:
    """KV positions reserved: attr ``capacity`` (default l); at least l."""
    cap = int(workload.attr("capacity", workload.dims["l"]))
    if cap < workload.dims["l"]:
        raise AutoschedError(f"{workload.key}: capacity {cap} is below the context length")
    return cap


def qrow_options(g: int, q: int) -> tuple[int, ...]:
    """Query-row group sizes: divisors of the GQA ratio, or multiples of it dividing g*q."""
    return tuple(t for t in range(1, g * q + 1) if g * q % t == 0 and (g % t == 0 or t % g == 0))


def shape_of(workload: Workload, hw: Hardware) -> AttnShape:
    """The rules' view of ``workload``; raises when no point of it can be laid out."""
    sh = attention_shape(workload.dims, capacity_of(workload), hw,
                         int(workload.attr("window", 0)))
    why = shape_reasons(sh)
    if why:
        raise AutoschedError(f"{workload.key}: " + "; ".join(why))
    return sh


def _present(sh: AttnShape) -> frozenset[str]:
    """The parameters a shape's space has beyond the always-present ones."""
    return frozenset((("v_units",) if sh.padded else ()) + (("batch_split",) if sh.b > 1 else ())
                     + (("v_groups",) if sh.v_group_max() > 1 else ()))


def _rules(sh: AttnShape) -> tuple[Rule, ...]:
    out, present = [], _present(sh)
    for r in ATTN_RULES:
        def check(values: dict, _r=r) -> str | None:
            return _r.check(sh, values)

        when = Cond("scores", r.scores) if r.scores else None
        reads = r.reads + tuple(x for x in r.optional if x in present)
        key = ("attention", sh.hw.fingerprint, sh.b, sh.q, sh.h, sh.kvh, sh.d, sh.cap,
               sh.window, r.name)
        out.append(Rule(r.name, reads, check, key, when))
    return tuple(out)


def attention_space(workload: Workload, hw: Hardware) -> Space:
    """The space of ``workload`` (family ``attention``) on ``hw``; an odd head dimension is
    refused (every model's is even: rotary embedding pairs its halves)."""
    if workload.dims["d"] % 2:
        raise SpaceError(f"{workload.key}: the head dimension d={workload.dims['d']} must be "
                         "even, as in every model (rotary embedding pairs its halves)")
    dims, sh = workload.dims, shape_of(workload, hw)
    present = _present(sh)
    regs, G, C = hw.pim.registers, dims["h"] // dims["kvh"], hw.org.channels
    qrows = qrow_options(G, dims["q"])
    modes = ("dot", "lane") if hw.pim.adder_tree else ("lane",)
    params: tuple[Param, ...] = (
        Param("kv_channels", Divisors(dims["kvh"], hi=C)),
        Param("seq_split", PowersOfTwo(1, C)),
        *((Param("batch_split", Divisors(dims["b"], hi=C)),) if "batch_split" in present
          else ()),
        Param("scores", Categorical(("pim", "host"))),
        Param("k_mode", Categorical(modes), Cond("scores", "pim")),
        Param("k_regs", PowersOfTwo(1, regs), Cond("scores", "pim")),
        Param("k_qrows", Categorical(qrows), Cond("scores", "pim")),
        Param("wsum", Categorical(("pim", "host"))),
        Param("v_qrows", Categorical(qrows), Cond("wsum", "pim")),
        Param("softmax_stages", PowersOfTwo(1, 4), Cond("wsum", "pim")),
    )
    if "v_units" in present:
        params += (Param("head_pad", Categorical((sh.dk,))),
                   Param("v_units", Categorical(sh.v_options())))
    if "v_groups" in present:
        params += (Param("v_groups", PowersOfTwo(1, sh.v_group_max()), Cond("wsum", "pim")),)
    d = workload.dims  # q k^T and p v over the whole context
    return Space("attention", VERSION, params, _rules(sh),
                 macs=2.0 * d["b"] * d["q"] * d["h"] * d["l"] * d["d"])


def attention_default(workload: Workload, hw: Hardware) -> dict:
    """All channels (kv heads side by side, then sequences of the batch, then the sequence
    split), scores and weighted sum on PIM, the most query rows per activated row, and
    the most score registers per query row whose register set does not exceed a unit's
    share of the cache (a larger set puts all the keys in the first streams of the split
    and leaves the others without any; one register when even that exceeds it). V goes
    to two groups of the fewest units that take a position in one column each where
    every stream runs at least four V passes and the global buffer holds both groups'
    probabilities for as many query rows as one group's (one group activates while the
    other MACs), else to the most units that fit, in one group."""
    space, dims, sh = attention_space(workload, hw), workload.dims, shape_of(workload, hw)
    regs, gb, C = hw.pim.registers, hw.gb_elems, hw.org.channels
    G = dims["h"] // dims["kvh"]
    kc = max(v for v in space.param("kv_channels").domain.values())
    split: dict[str, int] = {}
    if "batch_split" in _present(sh):
        split["batch_split"] = max(v for v in space.param("batch_split").domain.values()
                                   if kc * v <= C)
    used = kc * split.get("batch_split", 1)
    ss = max(v for v in space.param("seq_split").domain.values() if used * v <= C)
    opts = qrow_options(G, dims["q"])
    kq = max((t for t in opts if t <= G and t <= regs and t * sh.dk <= gb), default=1)
    mode = "dot" if hw.pim.adder_tree else "lane"
    share = unit_share(sh, {"seq_split": ss})
    regs_ok = [v for v in space.param("k_regs").domain.values() if kq * v <= regs]
    fits = sorted((v for v in regs_ok if k_set(sh, {"k_regs": v, "k_mode": mode}) <= share),
                  reverse=True) or [min(regs_ok)]
    # a query loaded in parts needs register sets of whole rows
    whole = [v for v in sorted(regs_ok, reverse=True) if k_parts(sh, {
        "k_qrows": kq, "k_mode": mode, "k_regs": v, "seq_split": ss}) is None]
    k_regs = next((v for v in fits if v in whole), whole[0] if whole else fits[0])
    units = sorted(sh.v_options(), reverse=True) if sh.padded else [0]
    tries = [(vu, 1) for vu in units]  # the most V units that fit: they work in parallel
    if "v_groups" in _present(sh):  # first two groups of the fewest one-column units
        U = hw.units_per_channel
        few = [x for x in sh.v_options() if x >= sh.cols] if sh.padded else [sh.uv({})]
        few = [x for x in few if U % (2 * x) == 0]
        if few:
            tries.insert(0, (min(few) if sh.padded else 0, 2))
    for vu, groups in tries:
        pad: dict = {"head_pad": sh.dk, "v_units": vu} if sh.padded else {}
        if "v_groups" in _present(sh):
            pad["v_groups"] = groups
        chunk = sh.chunk_v({**pad, "seq_split": ss})
        if groups > 1 and ceil_div(ceil_div(sh.span, chunk), ss) < 4:
            continue  # too few passes for the overlap to repay the second read-out
        vq, vq1 = (max((t for t in opts if t * sh.cpp(pad) <= regs
                        and n * t * chunk <= gb), default=1) for n in (groups, 1))
        if vq < vq1:
            continue  # the groups' probabilities would crowd out query rows
        point = {**pad, "kv_channels": kc, "seq_split": ss, **split, "scores": "pim",
                 "k_mode": mode, "k_regs": k_regs,
                 "k_qrows": kq, "wsum": "pim", "v_qrows": vq, "softmax_stages": 1}
        if not space.validate(point):
            return point
    pad = {"head_pad": sh.dk, "v_units": units[0]} if sh.padded else {}
    point = {**pad, "kv_channels": kc, "seq_split": ss, **split, "scores": "host",
             "wsum": "host"}
    space.check(point)
    return point
