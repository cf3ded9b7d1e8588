"""The moe kernel: the router GEMV, the host's routing, then the experts' dispatches.

Built from the GEMV family's own kernels (one per part, written as if each owned the
device), stitched here as the linker stitches fragments: rows stacked, buffers renamed,
tokens split per channel group. The PIM streams run

    head GEMV (router | shared gate | shared gate and up) ; wait routed ;
    [shared down GEMV] ; loop x over a group's experts j = g + groups * x:
      dispatch trip < T when trips[j]:
        gate|up GEMV over xg[j, trip] ; wait h_g ; wait free_g ; down GEMV over hb_g

and the host the matching reductions, ``select`` (every expert's weights and trips in
one op), ``gather`` (none at one row: the experts read it in place) and the shared
expert's activation before ``routed``, per trip the gate|up reduction with the
activation as its epilogue (``h_g``; a separate op when the down projection's rows are
padded) and the down projection's reduction into ``yg`` (``free_g``, given once ahead so
that the next expert's gate|up projection overlaps the host's last reduction), then
``combine``.
With ``split=groups`` expert j runs on channel group ``j % groups``, each group's
experts stacked in its own rows, so experts chosen together overlap on disjoint
channels. Every expert's weights stay resident; each dispatch's ``taken`` is its
group's trips on the expected path.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np

from autosched.codegen.rewrite import Rewrite, max_row, rewrite_body
from search_spaces import Workload
from sim.hardware import Hardware
from sim.isa import Act, BufRef, HostOp, Signal, Wait, aff
from sim.kernels import Kernel
from sim.program import Buffer, Dispatch, Loop, Node, Program, Stream, signals

from ..gemv.lowering import gemv_kernel
from . import routing
from .replicas import hot

__all__ = ["moe_kernel", "part_kernels", "replicated"]

TRIP = "trip"


def _gemv(m: int, n: int, k: int, dtype: str, hw: Hardware, side: str = "pim") -> Kernel:
    """The GEMV family's default kernel of ``[m, k] x [n, k]^T`` on ``side`` (``host``:
    the host multiplies, reading the weights where the banks keep them)."""
    from search_spaces.gemv import gemv_default

    w = Workload.make("gemv", dtype, None, m=m, n=n, k=k)
    return gemv_kernel(w, gemv_default(w, hw, placement=side), hw)


def sub_device(hw: Hardware, groups: int) -> Hardware:
    """``hw`` with ``1/groups`` of its channels: what one channel group is."""
    if groups == 1:
        return hw
    org = dataclasses.replace(hw.org, channels=hw.org.channels // groups)
    return dataclasses.replace(hw, org=org)


def part_kernels(w: Workload, point: dict, hw: Hardware) -> dict[str, Kernel]:
    """The GEMV kernels of one moe workload: ``head``, ``sdown`` (shared expert),
    ``gu`` and ``dn`` (one expert's, ``tile`` rows, on one channel group)."""
    d, dt = w.dims, w.dtype
    m, n, i, e, s = d["m"], d["n"], d["i"], d["e"], d["s"]
    shared = bool(w.attr("shared", 0))
    tile = min(int(point["tile"]), m)
    sub = sub_device(hw, _groups(point))
    side = str(point.get("placement", "pim"))
    out = {"head": _gemv(m, e + (1 + 2 * s if shared else 0), n, dt, hw, side),
           "gu": _gemv(tile, 2 * i, n, dt, sub, side), "dn": _gemv(tile, n, i, dt, sub, side)}
    if shared:
        out["sdown"] = _gemv(m, n, s, dt, hw, side)
    return out


def replicated(w: Workload, point: dict) -> tuple[int, ...]:
    """The experts ``point`` copies onto every device (attr ``ep`` > 1): the
    ``replicas`` most probable of the workload's routing."""
    r = int(point.get("replicas", 0))
    if not r or int(w.attr("ep", 1)) == 1:
        return ()
    return hot(routing.decode(str(w.attr("route", "uniform")), w.dims["e"]), r)


def _groups(point: dict) -> int:
    return int(point.get("groups", 1)) if point.get("split") == "groups" else 1


class _View:
    """A DeviceMemory seen from a part: its row 0 at ``row``, its channel 0 at ``ch``."""

    def __init__(self, mem: object, row: int, ch: int) -> None:
        self.mem, self.row, self.ch = mem, row, ch

    def write(self, ch: int, bank: int, row: int, col: int, values: np.ndarray) -> None:
        self.mem.write(ch + self.ch, bank, row + self.row, col, values)

    def write_rows(self, ch, bank, row, data) -> None:
        self.mem.write_rows(np.asarray(ch) + self.ch, bank, np.asarray(row) + self.row, data)

    def read(self, ch: int, bank: int, row: int, col: int, n: int) -> np.ndarray:
        return self.mem.read(ch + self.ch, bank, row + self.row, col, n)


def _trip_terms(body: Sequence[Node], strides: dict[str, int], var: str = TRIP,
                row: int = 0) -> tuple[Node, ...]:
    """``body`` with every window of buffer ``b`` moved ``strides[b]`` per step of
    ``var`` (and every activated row ``row`` rows per step)."""
    def val(v: object) -> object:
        if isinstance(v, BufRef) and v.buf in strides:
            terms = dict(v.offset.terms)
            terms[var] = terms.get(var, 0) + strides[v.buf]
            return BufRef(v.buf, aff(v.offset.base, **terms), v.shape)
        if isinstance(v, tuple) and v and isinstance(v[0], BufRef):
            return tuple(val(x) for x in v)
        return v

    out: list[Node] = []
    for nd in body:
        if isinstance(nd, Loop):
            out.append(dataclasses.replace(nd, body=_trip_terms(nd.body, strides, var, row)))
            continue
        ch = {f.name: val(getattr(nd, f.name)) for f in dataclasses.fields(nd)}
        if row and isinstance(nd, Act):
            terms = dict(nd.row.terms)
            terms[var] = terms.get(var, 0) + row
            ch["row"] = aff(nd.row.base, **terms)
        out.append(dataclasses.replace(nd, **ch) if any(
            ch[k] is not getattr(nd, k) for k in ch) else nd)
    return tuple(out)


class _Stitch:
    """Parts placed into one program: rows, buffers, and PIM bodies split at ``cuts``
    (the common refinement of every part's channel ranges), each refined group one
    stream; a PIM body's token ``t`` becomes ``t#start`` per group and the host waits for
    all of them."""

    def __init__(self, cuts: Sequence[int]) -> None:
        cuts = sorted(set(cuts))
        self.groups = list(zip(cuts[:-1], cuts[1:], strict=True))
        self.rows = 0
        self.buffers: dict[str, Buffer] = {}
        self.pim: dict[tuple[int, int], list[Node]] = {}
        self.parts: dict[str, tuple[str, ...]] = {}
        self.places: list[tuple[Kernel, int, int, str]] = []

    def buffer(self, name: str, dtype: str, size: int) -> str:
        old = self.buffers.get(name)
        self.buffers[name] = Buffer(name, dtype, max(size, old.size if old else 0))
        return name

    def part(self, kern: Kernel, tag: str, binds: dict[str, tuple[str, int]],
             ch0: int = 0, rows: int | None = None, tensor: str = "",
             trips: dict[str, int] | None = None) -> tuple[dict[tuple[int, int], list[Node]],
                                                            list[Node]]:
        """The part's PIM bodies by refined group and its host body, renamed; its weights
        at the next rows (or ``rows``) of channels from ``ch0``."""
        base = self.rows if rows is None else rows
        prog = kern.program
        for b in prog.buffers:
            if b.name not in binds:
                self.buffer(f"{tag}.{b.name}", b.dtype, b.size)

        def bufs(name: str) -> tuple[str, int]:
            return binds.get(name, (f"{tag}.{name}", 0))

        pim: dict[tuple[int, int], list[Node]] = {}
        host: list[Node] = []
        top = 0
        for stm in prog.streams:
            if stm.engine == "host":
                body = rewrite_body(stm.body, Rewrite(bufs, lambda t: (f"{tag}.{t}",)))
                host.extend(_trip_terms(body, trips) if trips else body)
                continue
            lo = stm.channels[0] + ch0
            hi = lo + len(stm.channels)
            mine = [(a, b) for a, b in self.groups if lo <= a < hi]
            for ins in signals(stm.body):
                self.parts[f"{tag}.{ins.token}"] = tuple(f"{tag}.{ins.token}#{a}"
                                                         for a, _ in mine)
            for a, b in mine:
                rw = Rewrite(bufs, lambda t, _a=a: (f"{tag}.{t}#{_a}",), base, a - lo)
                body = rewrite_body(stm.body, rw)
                pim.setdefault((a, b), []).extend(_trip_terms(body, trips) if trips else body)
            top = max(top, max_row(stm.body, len(stm.channels)) + 1)
        host = list(rewrite_body(tuple(host), Rewrite(tokens=lambda t: self.parts.get(t, (t,)))))
        if tensor:
            self.places.append((kern, base, ch0, tensor))
        if rows is None:
            self.rows += top
        return pim, host

    def emit(self, bodies: dict[tuple[int, int], list[Node]]) -> None:
        for rng, body in bodies.items():
            self.pim.setdefault(rng, []).extend(body)

    def streams(self, host: list[Node]) -> list[Stream]:
        out = [Stream(f"pim{a}", "pim", range(a, b), tuple(body))
               for (a, b), body in sorted(self.pim.items())]
        return [*out, Stream("host", "host", (), tuple(host))]


def _cuts(ks: dict[str, Kernel], groups: int, width: int) -> list[int]:
    cuts = {0}
    for name, kern in ks.items():
        offs = [g * width for g in range(groups)] if name in ("gu", "dn") else [0]
        for stm in kern.program.streams:
            if stm.engine == "pim":
                for o in offs:
                    cuts |= {stm.channels[0] + o, stm.channels[-1] + 1 + o}
    return sorted(cuts)


def moe_kernel(w: Workload, point: dict, hw: Hardware, taken: Sequence[int]) -> Kernel:
    """The moe kernel of ``point``; ``taken[j]``: the expected trips of this device's
    expert j (attr ``ep``: the experts are split over that many devices, each computing
    the routing whole and running its own; their outputs are summed over the link;
    point ``replicas``: that many hot experts also have a slot on every device, which
    runs its share of their rows, see :mod:`.replicas`)."""
    d = w.dims
    m, n, i, e, k, s = d["m"], d["n"], d["i"], d["e"], d["k"], d["s"]
    shared = bool(w.attr("shared", 0))
    tile = min(int(point["tile"]), m)
    count = math.ceil(m / tile)
    slot = count * tile
    groups = _groups(point)
    width = hw.org.channels // groups
    ep = int(w.attr("ep", 1))  # devices sharing the experts: this one holds e / ep
    hot = replicated(w, point)
    local = e // ep + len(hot)  # this device's expert slots
    total = ep * local  # every device's slots, as ``select`` lays them out
    ks = part_kernels(w, point, hw)
    pad = {name: kern.padded_shapes[0][-1] for name, kern in ks.items()}
    xdt = {name: kern.program.buffer(kern.inputs[0]).dtype for name, kern in ks.items()}
    names = routing.register(e, k, bool(w.attr("norm", 0)), slot, tile, n, s,
                             pad["gu"], pad["dn"], pad.get("sdown", 0), ep, hot)
    nh = ks["head"].output_shape[-1]
    # one row: every chosen expert reads x itself, there is nothing to gather
    direct = m == 1 and pad["gu"] == pad["head"] and xdt["gu"] == xdt["head"]
    # no padding after the activation: it is the gate|up reduction's own epilogue
    fused = pad["dn"] == i
    st = _Stitch(_cuts(ks, groups, width))
    st.buffer("x", xdt["head"], m * pad["head"])
    for name, dt, size in (("hd", "fp32", m * nh), ("rt", "fp32", total * m + total),
                           *(() if direct else (("xg", xdt["gu"], local * slot * pad["gu"]),)),
                           ("yg", "fp32", local * slot * n), ("y", "fp32", m * n)):
        st.buffer(name, dt, size)
    host: list[Node] = []
    head_pim, head_host = st.part(ks["head"], "head", {"x": ("x", 0), "y": ("hd", 0)},
                                  tensor="head")
    st.emit(head_pim)
    host += head_host

    def ext(fn: str, out: tuple[str, tuple[int, ...]],
            ins: Sequence[tuple[str, tuple] | BufRef], flops: float) -> HostOp:
        return HostOp("extern", (BufRef(out[0], aff(0), out[1]),),
                      tuple(b if isinstance(b, BufRef) else BufRef(b[0], aff(0), b[1])
                            for b in ins),
                      (("fn", fn), ("flops", float(flops))))

    # one host op routes: every slot's weights (expert-major), then every slot's trips
    host.append(ext(names["select"], ("rt", (total * m + total,)), [("hd", (m, nh))],
                    9 * m * e))
    wts = BufRef("rt", aff(0, dev=local * m), (local, m))  # this device's slots' weights
    if not direct:
        host.append(ext(names["gather"], ("xg", (local * slot, pad["gu"])),
                        [("x", (m, pad["head"])), wts], m * k * n))
    if shared:
        st.buffer("sact", xdt["sdown"], m * pad["sdown"])
        st.buffer("ys", "fp32", m * n)
        host.append(ext(names["shared"], ("sact", (m, pad["sdown"])), [("hd", (m, nh))],
                        6 * m * s))
    host.append(Signal("routed"))
    for body in st.pim.values():
        body.append(Wait(("routed",)))
    if shared:
        sp, sh = st.part(ks["sdown"], "sdown", {"x": ("sact", 0), "y": ("ys", 0)},
                         tensor="sdown")
        st.emit(sp)
        host += sh
    base = st.rows
    per_group = local // groups  # expert j = g + groups * x runs on channel group g
    top_gu, top_dn = _top(ks["gu"]), _top(ks["dn"])
    stride = top_gu + top_dn  # rows of one expert in its group's channels
    hosts: list[Node] = []
    for g in range(groups):
        xg0, yg0 = g * slot * pad["gu"], g * slot * n
        st.buffer(f"hb{g}", xdt["dn"], tile * pad["dn"])
        gu_p, gu_h = st.part(ks["gu"], f"gu{g}", {"x": ("x", 0) if direct else ("xg", xg0),
                                                   "y": ("gu", 0)},
                             ch0=g * width, rows=base, trips={"xg": tile * pad["gu"]})
        dn_p, dn_h = st.part(ks["dn"], f"dn{g}", {"x": (f"hb{g}", 0), "y": ("yg", yg0)},
                             ch0=g * width, rows=base + top_gu, trips={"yg": tile * n})
        # expert j's trips, at the same element on every channel of this device
        sel = BufRef("rt", aff(total * m + g, x=groups, dev=local), (1,))
        hb = BufRef(f"hb{g}", aff(0), (tile, pad["dn"]))
        act = _activated(gu_h, "gu", hb) if fused else None
        if act is None:  # the activation pads its rows: an op of its own, from ``gu``
            st.buffer("gu", "fp32", tile * 2 * i)
            act = [*gu_h, ext(names["act"], (hb.buf, hb.shape), [("gu", (tile, 2 * i))],
                              6 * tile * i)]
        gu_h = act
        step = {"xg": groups * slot * pad["gu"], "yg": groups * slot * n}
        mine = sum(int(t) for t in taken[g::groups])
        hbody = _trip_terms((*gu_h, Signal(f"h{g}"), *dn_h, Signal(f"free{g}")), step, "x")
        hosts.append(Dispatch(TRIP, count, hbody, sel, mine))
        for rng in sorted(set(gu_p) | set(dn_p)):
            body = [*gu_p.get(rng, []), Wait((f"h{g}",)), Wait((f"free{g}",)),
                    *dn_p.get(rng, [])]
            body = list(_trip_terms(tuple(body), step, "x", row=stride))
            st.pim.setdefault(rng, []).append(
                Loop("x", per_group, (Dispatch(TRIP, count, tuple(body), sel, mine),)))
        for q in range(per_group):
            j = g + groups * q
            src = str(j) if j < e // ep else f"@{hot[j - e // ep]}"  # own, or a replica
            st.places.append((ks["gu"], base + q * stride, g * width, f"gu.{src}"))
            st.places.append((ks["dn"], base + q * stride + top_gu, g * width, f"dn.{src}"))
    # one credit per group: its first down projection may write the part buffer at once
    host.extend(Signal(f"free{g}") for g in range(groups))
    host.append(Loop("x", per_group, tuple(hosts)))
    per = [per_group * stride]
    st.rows = base + max(per)
    rest: list = [("yg", (local * slot, n)), wts]
    if shared:
        rest += [("hd", (m, nh)), ("ys", (m, n))]
    host.append(ext(names["combine"], ("y", (m, n)), rest, 2 * m * k * n))
    prog = Program(tuple(st.streams(host)), tuple(st.buffers.values()),
                   name=f"moe_{m}x{n}_e{e}k{k}_i{i}")
    places = list(st.places)

    def place(mem: object, tensors: dict[str, np.ndarray]) -> None:
        for kern, row, ch, tensor in places:
            kern.place(_View(mem, row, ch), {"W": _tensor(tensors, tensor)})

    staged = tuple(b for b in st.buffers if b.split(".")[-1] in
                   {x for kern in ks.values() for x in kern.staged})
    return Kernel(prog, ("x",), "y", (m, n), place, ((m, n),), ((m, pad["head"]),),
                  staged=staged)


_ACTIVATES = frozenset(("gemv_out", "matmul", "matmul_layout"))  # width from own_width


def _activated(body: Sequence[Node], src: str, dst: BufRef) -> list[Node] | None:
    """``body`` with the host op that ends it writing ``silu(gate) * up`` into ``dst``
    (its ``silu_mul`` epilogue) instead of the product into ``src``; None when ``body``
    does not end in one such op."""
    last = body[-1] if body else None
    if not (isinstance(last, HostOp) and last.kind in _ACTIVATES and last.outs[0].buf == src
            and not last.attr("epi")):
        return None
    return [*body[:-1], dataclasses.replace(last, outs=(dst,),
                                            attrs=(*last.attrs, ("epi", "silu_mul")))]


def _top(kern: Kernel) -> int:
    return max(max_row(st.body, len(st.channels)) + 1
               for st in kern.program.streams if st.engine == "pim")


def _tensor(tensors: dict[str, np.ndarray], tag: str) -> np.ndarray:
    """The ``[n, k]`` matrix of part ``tag``: ``head``, ``sdown``, ``gu.j``, ``dn.j``
    (this device's expert ``j``) or ``gu.@j``, ``dn.@j`` (expert ``j`` of the model, from
    the whole stack ``gate_up@all``, ``down@all``; the stack when it is all there is)."""
    if "." in tag:
        name, j = tag.split(".")
        stack = "gate_up" if name == "gu" else "down"
        if j.startswith("@"):
            return tensors.get(f"{stack}@all", tensors[stack])[int(j[1:])]
        return tensors[stack][int(j)]
    return tensors[tag]

