"""The schedule space of attention over a KV cache (workload family ``attention``).

Parameters (every domain depends on b, q, h, kvh, d, the capacity and the hardware, never
on the context length l, so one schedule serves every decoding step):

* ``kv_channels``: kv heads served side by side by one stream's channels (the rest are
  looped); ``seq_split``: streams the sequence is dealt over, in chunks (KV placement by
  head, by sequence blocks, or both). Channels used: ``kv_channels * seq_split``.
* ``scores`` (q k^T) on ``pim`` or ``host``; on PIM: ``k_mode`` ``dot`` (adder tree, 16
  positions per register) or ``lane`` (16 lane partials per position, summed on the host),
  ``k_regs`` registers per query row, ``k_qrows`` query rows MACed against each activated
  K row (GQA: the query heads of one kv head reuse the row; prefill adds tokens).
* ``wsum`` (p v) on ``pim`` or ``host``; on PIM ``v_qrows`` query rows per activated V row.

Softmax always runs on the host: it needs a max and a sum over every position of a row,
which live in different banks and channels, and the units have no exp. Attribute
``capacity`` of the workload (default l) is the number of KV positions reserved.
"""

from __future__ import annotations

from search_spaces.constraints import Constraint
from search_spaces.domains import Categorical, Divisors, PowersOfTwo
from search_spaces.expr import Const, Var, cdiv
from search_spaces.params import Cond, Param
from search_spaces.space import Space
from search_spaces.workload import Workload
from sim.errors import AutoschedError
from sim.hardware import Hardware

__all__ = ["attention_default", "attention_space", "capacity_of", "qrow_options"]


def capacity_of(workload: Workload) -> int:
    """KV positions reserved: attr ``capacity`` (default l); at least l."""
    cap = int(workload.attr("capacity", workload.dims["l"]))
    if cap < workload.dims["l"]:
        raise AutoschedError(f"{workload.key}: capacity {cap} is below the context length")
    return cap


def qrow_options(g: int, q: int) -> tuple[int, ...]:
    """Query-row group sizes: divisors of the GQA ratio, or multiples of it dividing g*q."""
    return tuple(t for t in range(1, g * q + 1) if g * q % t == 0 and (g % t == 0 or t % g == 0))


def _geometry(w: Workload, hw: Hardware) -> dict[str, int]:
    dims = w.dims
    d, e, u = dims["d"], hw.row_elems, hw.units_per_channel
    if d % 16 or e % d or (d // 16) & (d // 16 - 1) or dims["h"] % dims["kvh"]:
        raise AutoschedError(f"{w.key}: head dim must be 16 x a power of two dividing the "
                             f"{e}-element row, and h a multiple of kvh")
    uv = min(u, d // 16)
    cpp = d // 16 // uv
    chunk_v = hw.columns_per_row // cpp
    return {"d": d, "ppr": e // d, "cpp": cpp, "chunk_v": chunk_v,
            "plain": hw.org.banks_per_channel * e // d, "u": u}


def attention_space(workload: Workload, hw: Hardware) -> Space:
    """The space of ``workload`` (family ``attention``) on ``hw``."""
    dims, g = workload.dims, _geometry(workload, hw)
    cap, regs, gb = capacity_of(workload), hw.pim.registers, hw.gb_elems
    G, C = dims["h"] // dims["kvh"], hw.org.channels
    qrows = qrow_options(G, dims["q"])
    modes = ("dot", "lane") if hw.pim.adder_tree else ("lane",)
    params = (
        Param("kv_channels", Divisors(dims["kvh"], hi=C)),
        Param("seq_split", PowersOfTwo(1, C)),
        Param("scores", Categorical(("pim", "host"))),
        Param("k_mode", Categorical(modes), Cond("scores", "pim")),
        Param("k_regs", PowersOfTwo(1, regs), Cond("scores", "pim")),
        Param("k_qrows", Categorical(qrows), Cond("scores", "pim")),
        Param("wsum", Categorical(("pim", "host"))),
        Param("v_qrows", Categorical(qrows), Cond("wsum", "pim")),
    )
    kc, ss = Var("kv_channels"), Var("seq_split")
    rows_k = max(-(-cap // (g["u"] * g["ppr"])), -(-cap // g["plain"]))
    rows_v = max(-(-cap // g["chunk_v"]), -(-cap // g["plain"]))
    rpp = max(1, 16 * regs // g["ppr"])
    cons = (
        Constraint("channels", kc * ss, "<=", C, "{expr}={lhs} channels, the device has {rhs}"),
        Constraint("k_registers", Var("k_qrows") * Var("k_regs"), "<=", regs,
                   "{expr}={lhs} registers per unit, the unit has {rhs}"),
        Constraint("k_buffer", Var("k_qrows") * g["d"], "<=", gb,
                   "{expr}={lhs} query elements overflow the global buffer ({rhs})"),
        Constraint("v_registers", Var("v_qrows") * g["cpp"], "<=", regs,
                   "{expr}={lhs} registers per unit, the unit has {rhs}"),
        Constraint("v_buffer", Var("v_qrows") * g["chunk_v"], "<=", gb,
                   "{expr}={lhs} probabilities overflow the global buffer ({rhs})"),
        Constraint("cache_rows", Const(dims["b"] * dims["kvh"]) // kc
                   * (cdiv(rows_k, ss) + rpp + cdiv(rows_v, ss)), "<=", hw.org.rows_per_bank,
                   "the KV cache needs up to {lhs} rows per bank, the bank has {rhs}: use "
                   "more channels"),
    )
    return Space("attention", 1, params, cons)


def attention_default(workload: Workload, hw: Hardware) -> dict:
    """All channels, scores and weighted sum on PIM, the most query rows per activated row."""
    space, dims, g = attention_space(workload, hw), workload.dims, _geometry(workload, hw)
    regs, gb, C = hw.pim.registers, hw.gb_elems, hw.org.channels
    G = dims["h"] // dims["kvh"]
    kc = max(v for v in space.param("kv_channels").domain.values())
    ss = max(v for v in space.param("seq_split").domain.values() if kc * v <= C)
    opts = qrow_options(G, dims["q"])
    kq = max((t for t in opts if t <= G and t <= regs and t * g["d"] <= gb), default=1)
    vq = max((t for t in opts if t * g["cpp"] <= regs and t * g["chunk_v"] <= gb), default=1)
    point = {"kv_channels": kc, "seq_split": ss, "scores": "pim",
             "k_mode": "dot" if hw.pim.adder_tree else "lane",
             "k_regs": max(v for v in space.param("k_regs").domain.values() if kq * v <= regs),
             "k_qrows": kq, "wsum": "pim", "v_qrows": vq}
    if space.validate(point):
        point = {"kv_channels": kc, "seq_split": ss, "scores": "host", "wsum": "host"}
    space.check(point)
    return point
