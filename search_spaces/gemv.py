"""The GEMV/GEMM schedule space: ``y[m, n] = x[m, k] @ W[n, k]^T`` on a PIM device.

``placement`` picks the engine. ``host``: the weights stay in the banks in plain-memory
layout and stream to the host, which multiplies (``sim.kernels.gemv_baseline``). ``pim``:
every ``sim.kernels.GemvOpts`` decision is a parameter (``tile_outer`` is the loop order
``tile_outer`` when true, ``row_outer`` when false; ``interleave`` exists only on devices
with bank-pair units). Every rule of ``sim.kernels.plan_gemv`` is a constraint here, so a
point is valid exactly when the library kernel accepts its options (the tests check this
both ways). ``gb_tile`` ranges over powers of two; on a device whose row geometry is not
a power of two some modes then have no valid tile, and validation says so.
"""

from __future__ import annotations

from search_spaces.constraints import Constraint
from search_spaces.domains import Categorical, Divisors, IntRange, PowersOfTwo
from search_spaces.expr import Const, Expr, Var, cdiv
from search_spaces.params import Cond, Param
from search_spaces.space import Space
from search_spaces.workload import Workload
from sim.errors import AutoschedError, check
from sim.hardware import Hardware
from sim.kernels import GemvOpts, plan_gemv

__all__ = ["GEMV_VERSION", "baseline_rows", "gemv_default", "gemv_modes", "gemv_space",
           "point_opts"]

GEMV_VERSION = 1
_PIM = Cond("placement", "pim")
_BOOL = Categorical((False, True))


def gemv_modes(hw: Hardware) -> tuple[str, ...]:
    """The MAC modes ``hw`` offers for a GEMV (dot needs an adder tree; bcast and lane
    need one register lane per SIMD lane)."""
    modes = ("dot",) if hw.pim.adder_tree else ()
    if hw.pim.register_lanes == hw.pim.lanes:
        modes += ("bcast", "lane")
    return modes


def baseline_rows(hw: Hardware, n: int, k: int) -> int:
    """Rows per bank the plain-memory layout of ``W[n, k]`` needs."""
    per_row = hw.org.channels * hw.org.banks_per_channel * hw.row_elems
    return -(-n * k // per_row)


def _dims(w: Workload) -> tuple[int, int, int]:
    check(w.op in ("gemv", "gemm"), f"the gemv space takes gemv or gemm workloads, not {w.op}")
    d = w.dims
    return d["m"], d["n"], d["k"]


def _mode_constraints(hw: Hardware, n: int, k: int, mode: str) -> list[Constraint]:
    """Row-geometry, register and capacity rules of one MAC mode."""
    p, when = hw.pim, Cond("mode", mode)
    kr = hw.columns_per_row if mode == "bcast" else hw.row_elems
    opr = 1 if mode == "lane" else p.register_lanes
    t, r, br, ks = Var("gb_tile"), Var("registers"), Var("batch_rows"), Var("k_split")
    passes = cdiv(n * ks, Var("channels") * (hw.units_per_channel * opr) * r)
    spr = cdiv(Const(kr), t)
    share: Expr = Const(p.register_lanes) if mode == "dot" else r
    step = t * (1 + Var("double_buffer"))
    ntiles = cdiv(cdiv(Const(k), ks), step) * step // t
    stripes = r * (p.register_lanes // spr) if mode == "dot" else r // spr
    rps: Expr = cdiv(t, kr)
    if hw.pim.banks_per_unit == 2:
        rps = rps // (1 + Var("interleave"))
    out = [
        Constraint(f"tile_{mode}", (t % kr) * (kr % t), "==", 0,
                   f"gb_tile {{gb_tile}} must be a multiple or divisor of {kr} (k per row in "
                   f"{mode} mode)", when),
        Constraint(f"segments_{mode}", share % spr, "==", 0,
                   f"gb_tile {{gb_tile}} packs {kr}/gb_tile segments per row, which must divide "
                   f"the {'register lanes' if mode == 'dot' else 'registers'} ({share}): use a "
                   "larger tile or more registers", when),
        Constraint(f"live_registers_{mode}", br * r * (1 + Var("tile_outer") * (passes - 1)),
                   "<=", p.registers,
                   "{expr}={lhs} registers live per unit (batch_rows x registers, x passes "
                   "when tile_outer) exceed the {rhs} available", when),
        Constraint(f"bank_rows_{mode}", passes * ntiles * stripes * rps, "<=",
                   hw.org.rows_per_bank,
                   "the layout needs {lhs} rows per bank, the bank has {rhs}: use more "
                   "channels or registers", when),
    ]
    if hw.pim.banks_per_unit == 2:
        out.append(Constraint(f"interleave_{mode}", Var("interleave") * (t % (2 * kr)), "==", 0,
                              f"interleave needs gb_tile a multiple of {2 * kr} in {mode} mode",
                              when))
    return out


def gemv_space(workload: Workload, hw: Hardware) -> Space:
    """The space of ``workload`` (family gemv or gemm) on ``hw``."""
    m, n, k = _dims(workload)
    p, c = hw.pim, hw.org.channels
    modes = gemv_modes(hw)
    check(bool(modes), f"{hw.name} offers no GEMV MAC mode (needs an adder tree or "
                       "register_lanes == lanes)")
    lo = 1 if "bcast" in modes else p.lanes
    params = [
        Param("placement", Categorical(("pim", "host"))),
        Param("mode", Categorical(modes), _PIM),
        Param("channels", Divisors(c), _PIM),
        Param("k_split", Divisors(c), _PIM),
        Param("gb_tile", PowersOfTwo(lo, max(lo, hw.gb_elems)), _PIM),
        Param("registers", IntRange(1, p.registers), _PIM),
        Param("batch_rows", IntRange(1, min(m, p.registers)), _PIM),
        Param("tile_outer", _BOOL, _PIM),
        Param("double_buffer", _BOOL, _PIM),
    ]
    if p.banks_per_unit == 2:
        params.append(Param("interleave", _BOOL, _PIM))
    cons = [
        Constraint("k_split_divides", Var("channels") % Var("k_split"), "==", 0,
                   "k_split {k_split} must divide channels {channels}"),
        Constraint("gb_fits", Var("batch_rows") * Var("gb_tile") * (1 + Var("double_buffer")),
                   "<=", hw.gb_elems,
                   "batch_rows x gb_tile (x 2 with double_buffer) = {lhs} exceeds the global "
                   "buffer of {rhs} elements"),
        Constraint("host_rows", Const(baseline_rows(hw, n, k)), "<=", hw.org.rows_per_bank,
                   "W in plain-memory layout needs {lhs} rows per bank, the bank has {rhs}",
                   Cond("placement", "host")),
    ]
    for mode in modes:
        cons += _mode_constraints(hw, n, k, mode)
    return Space(workload.op, GEMV_VERSION, tuple(params), tuple(cons))


def point_opts(point: dict) -> GemvOpts:
    """The library options of a pim point."""
    return GemvOpts(mode=point["mode"], channels=point["channels"], k_split=point["k_split"],
                    gb_tile=point["gb_tile"], registers=point["registers"],
                    batch_rows=point["batch_rows"],
                    loop_order="tile_outer" if point["tile_outer"] else "row_outer",
                    interleave=point.get("interleave", False),
                    double_buffer=point["double_buffer"])


def _opts_point(o: GemvOpts, hw: Hardware) -> dict:
    pt = {"placement": "pim", "mode": o.mode, "channels": o.channels, "k_split": o.k_split,
          "gb_tile": o.gb_tile, "registers": o.registers, "batch_rows": o.batch_rows,
          "tile_outer": o.loop_order == "tile_outer", "double_buffer": o.double_buffer}
    if hw.pim.banks_per_unit == 2:
        pt["interleave"] = o.interleave
    return pt


def _competent(hw: Hardware, n: int, k: int, m: int, br: int) -> list[GemvOpts]:
    """Library options a careful engineer would pick, best first: split the reduction over
    channels until the outputs fill every unit's lanes (the layout wastes no bank rows on
    padding), and alternate the two banks of a pair so one activates while the other
    MACs. Ordered by rows per bank, then interleaving, then the smaller split."""
    splits = [d for d in range(1, hw.org.channels + 1)
              if hw.org.channels % d == 0 and d & (d - 1) == 0]
    pairs = (True, False) if hw.pim.banks_per_unit == 2 else (False,)
    ranked = []
    for ks in splits:
        for il in pairs:
            o = GemvOpts(batch_rows=br, k_split=ks, interleave=il)
            if not o.validate(hw, n, k, m):
                rows = plan_gemv(hw, n, k, m, o).rows_per_bank
                ranked.append(((rows, not il, ks), o))
    return [o for _, o in sorted(ranked, key=lambda r: r[0])]


def gemv_default(workload: Workload, hw: Hardware) -> dict:
    """What a competent engineer writes by hand; host when nothing fits on PIM.

    gemv: the library kernel with the reduction split over channels just enough to fill
    every unit's lanes and, on bank-pair devices, bank interleaving (see ``_competent``);
    the plain library options when no such choice is valid. gemm: the same with
    ``batch_rows`` as large as valid (weight reuse across the batch). Raises
    AutoschedError when neither placement fits the device.
    """
    m, n, k = _dims(workload)
    space = gemv_space(workload, hw)
    tries = [1] if workload.op == "gemv" else range(min(m, hw.pim.registers), 0, -1)
    for br in tries:
        for o in (*_competent(hw, n, k, m, br), GemvOpts(batch_rows=br)):
            if o.validate(hw, n, k, m):
                continue
            pt = _opts_point(o.resolve(hw, n, k, m), hw)
            if not space.validate(pt):
                return pt
    if not space.validate({"placement": "host"}):
        return {"placement": "host"}
    raise AutoschedError(f"{workload.key} fits {hw.name} neither on PIM nor in plain memory: "
                         f"{'; '.join(space.validate({'placement': 'host'}))}")
