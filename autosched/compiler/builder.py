"""Building one pipeline stage: a schedule per node, its kernel, where every operand lives,
the transfers between devices, and the link into one program.

Every node's output lives in a global host buffer named after the node. At one row
(decode, batch 1) producers that feed a concatenation write straight into windows of a
shared buffer and consumers read windows of their producer; with several rows, host
glue kernels copy instead (:mod:`.glue`). With ``tp > 1`` devices in the stage, each
reduced projection's partial sums are all-reduced in place (one-shot or two-shot,
whichever the link and host make faster) and the LM head's vocabulary slices gathered
(and reordered by row when the step has several); a buffer a later stage reads is sent
to the device of the same rank there.
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

from autosched.codegen import Fragment, link
from autosched.codegen.coalesce import coalesce_kernel
from autosched.database import Database
from autosched.families import build, family_of, space_of
from autosched.fusion import TOKEN_IDS, FusedView, operands, output_width
from autosched.ir import OpGraph, OpNode
from autosched.lookup import LookupKind, LookupResult, lookup
from search_spaces import Schedule, Workload
from sim.errors import AutoschedError
from sim.hardware import Hardware, System
from sim.isa import BufRef, HostOp, Send, Signal, aff
from sim.kernels import Kernel
from sim.kernels.collective import ALGORITHMS, all_gather, all_reduce, collective_ns
from sim.program import Buffer, Program, Stream

from .glue import gather
from .partition import REDUCED
from .placement import faster_default, side_schedule
from .stage import CompiledStage

__all__ = ["Builder", "library_choice", "link_stage"]


def library_choice(workload: Workload, hw: Hardware) -> LookupResult:
    """The shipped library kernel's point (kind ``library``) where the library has a kernel
    for ``workload``, else the family's default (kind ``default``)."""
    fam = family_of(workload)
    space = space_of(workload, hw)
    lib = fam.library(workload, hw)
    if lib is None:
        return LookupResult(LookupKind.DEFAULT, workload,
                            Schedule.of(space, fam.default(workload, hw)))
    return LookupResult(LookupKind.LIBRARY, workload, Schedule.of(space, lib))


@lru_cache(maxsize=4096)
def _build(w: Workload, s: Schedule, hw: Hardware) -> Kernel:
    """Family is deterministic: each (workload, schedule, hardware) is built once, its
    per-channel streams coalesced (:func:`~autosched.codegen.coalesce.coalesce`) before
    the linker copies streams per channel group."""
    return coalesce_kernel(build(w, s, hw), hw)


class Builder:
    """Per-stage state: schedule choices, kernel cache, fragments in order."""

    def __init__(self, graph: OpGraph, system: System, db: Database | None,
                 schedules: dict[str, Schedule] | str | None, placement: str | None,
                 tp: int = 1, fitted: dict[str, Schedule] | None = None, *,
                 roles: frozenset[str] | None = None) -> None:
        self.graph, self.system, self.hw, self.db = graph, system, system.device, db
        self.tp = tp
        self.roles = roles  # the roles the tp devices split (None: all of them)
        self.fitted = fitted or {}  # denser layouts chosen to fit, over everything else
        self.library = schedules == "library"
        if isinstance(schedules, str) and not self.library:
            raise AutoschedError(f"schedules {schedules!r}: give a node -> schedule mapping "
                                 "or 'library'")
        self.schedules = {} if self.library else schedules or {}
        self.placement = placement
        self.choices: dict[str, LookupResult] = {}
        self.kernels: dict[str, Kernel] = {}
        self.frags: list[Fragment] = []
        self.constants: set[str] = {TOKEN_IDS}
        self._looked: dict[str, LookupResult] = {}
        self.one_row = graph.batch * graph.tokens == 1
        self.homes = self._homes()
        self.alias: dict[str, tuple[str, int]] = {}  # what consumers read instead

    def _homes(self) -> dict[str, tuple[str, int]]:
        """At one row, sources concatenated whole by a consumer live side by side."""
        homes: dict[str, tuple[str, int]] = {}
        if not self.one_row:
            return homes
        for n in self.graph:
            for name, views in operands(self.graph, n).items():
                if len(views) < 2 or any(v.source in homes for v in views):
                    continue
                if all(v.lo == 0 and v.hi == (v.width or output_width(
                        self.graph.node(v.source).workload)) for v in views):
                    off = 0
                    for v in views:
                        homes[v.source] = (f"{n.name}.{name}", off)
                        off += v.hi
        return homes

    def choose(self, n: OpNode) -> LookupResult:
        w = n.workload
        if n.name in self.fitted:
            return LookupResult(LookupKind.FITTED, w, self.fitted[n.name])
        if n.name in self.schedules:
            return LookupResult(LookupKind.GIVEN, w, self.schedules[n.name])
        if w.key not in self._looked:
            self._looked[w.key] = self._choose(w)
        return self._looked[w.key]

    def _choose(self, w: Workload) -> LookupResult:
        if self.library:
            return library_choice(w, self.hw)
        if self.placement == "host" or (self.placement == "pim" and family_of(w).in_banks):
            s = side_schedule(w, self.hw, self.placement, self.db)
            if s is not None:
                return LookupResult(LookupKind(self.placement), w, s)
        res = lookup(self.db, w, self.hw)
        # untuned rows of several tokens or sequences: each operator on its faster side
        if res.kind is LookupKind.DEFAULT and (self.graph.phase == "prefill"
                                              or self.graph.batch > 1):
            return LookupResult(LookupKind.DEFAULT, w, faster_default(w, self.hw))
        return res

    def out_home(self, name: str) -> tuple[str, int]:
        """Where node ``name`` writes its output."""
        return self.homes.get(name, (name, 0))

    def home(self, name: str) -> tuple[str, int]:
        """Where consumers of node ``name`` read its output."""
        return self.alias.get(name) or self.out_home(name)

    def source(self, n: OpNode, local: str, views: tuple[FusedView, ...]) -> tuple[str, int]:
        """Where the kernel input ``local`` of ``n`` (the concatenation of ``views``) lives."""
        g = self.graph
        if views[0].source == TOKEN_IDS:
            return TOKEN_IDS, 0
        first = self.home(views[0].source)
        widths = [v.width or output_width(g.node(v.source).workload) for v in views]
        if not any(v.last for v in views):
            if len(views) == 1 and (self.one_row or widths[0] == views[0].hi - views[0].lo):
                return first[0], first[1] + views[0].lo
            if self.one_row and all(self.home(v.source) == (first[0], first[1] + sum(
                    widths[:i])) for i, v in enumerate(views)):
                return first  # producers already write side by side
        rows = g.batch * g.tokens
        last = views[0].last
        tag = f"{n.name}.{local}"
        k = gather(g.batch if last else rows, rows,
                   tuple((wd, v.lo, v.hi) for wd, v in zip(widths, views, strict=True)),
                   stride=g.tokens if last else 1, offset=g.tokens - 1 if last else 0)
        binds = [(f"p{i}", *self.home(v.source)) for i, v in enumerate(views)]
        self.frags.append(Fragment(tag, k, (*binds, ("y", tag))))
        return tag, 0

    def add(self, n: OpNode) -> None:
        res = self.choose(n)
        self.choices[n.name] = res
        k = _build(res.workload, res.schedule, self.hw)
        self.kernels[n.name] = k
        binds = [(k.output, *self.out_home(n.name))] + [
            (local, *self.source(n, local, views))
            for local, views in operands(self.graph, n).items()]
        bound = {b[0] for b in binds}
        self.constants |= {f"{n.name}.{c}" for c in k.inputs if c not in bound}
        self.frags.append(Fragment(n.name, k, tuple(binds)))
        self._collectives(n)

    def _collectives(self, n: OpNode) -> None:
        """With ``tp > 1``: the all-reduce after a reduced projection, the gather of the
        LM head's vocabulary slices."""
        if self.tp == 1 or self.roles is not None and n.role not in self.roles:
            return
        w, tp = n.workload, self.tp
        if n.role in REDUCED:
            size = w.dims["m"] * output_width(w)
            algo = min(ALGORITHMS, key=lambda a: collective_ns(
                "all_reduce", tp, size, self.system.link, self.hw, a))
            home = self.out_home(n.name)
            self.frags.append(Fragment(f"{n.name}.ar", all_reduce(tp, size, algo),
                                       (("x", *home), ("y", *home))))
        elif n.role == "lm_head":
            m, vs = w.dims["m"], output_width(w)
            tag = f"{n.name}.all"
            self.frags.append(Fragment(tag, all_gather(tp, m * vs),
                                       (("x", *self.out_home(n.name)), ("y", tag))))
            if m > 1:
                self.frags.append(Fragment(f"{n.name}.full", _reorder(tp, m, vs),
                                           (("x", tag), ("y", f"{n.name}.full"))))
                tag = f"{n.name}.full"
            self.alias[n.name] = (tag, 0)


def _point(b: Builder, name: str) -> dict | None:
    """The point of the schedule chosen for node ``name`` (None: none was chosen)."""
    res = b.choices.get(name)
    return res.schedule.point if res is not None else None


def _no_weights(mem: object, tensors: dict) -> None:
    """Transfers place nothing in the banks."""


def _hop(size: int, dst: str, off: int, group: int) -> Kernel:
    """Send ``x[size]`` to buffer ``dst`` (at ``off``) of the same-rank device of
    ``group``; signals ``sent`` on arrival."""
    stream = Stream("link", "link", (), (
        Send(BufRef("x", aff(0), (size,)), BufRef(f"@{dst}", aff(off), (size,)),
             aff(0, dev=1), group), Signal("sent")))
    prog = Program((stream,), (Buffer("x", "fp32", size),), name=f"hop_{size}")
    return Kernel(prog, ("x",), "x", (size,), _no_weights, ((size,),), ((size,),))


def _reorder(tp: int, m: int, vs: int) -> Kernel:
    """``y[m, tp*vs]`` from ``x[tp, m, vs]`` (the gathered vocabulary slices)."""
    out = BufRef("y", aff(0), (m, tp * vs))
    body = tuple(HostOp("copy_cols", (out,), (BufRef("x", aff(s * m * vs), (m, vs)), out),
                        (("lo", 0), ("hi", vs), ("col", s * vs), ("clear", int(s == 0))))
                 for s in range(tp))
    prog = Program((Stream("host", "host", (), body),),
                   (Buffer("x", "fp32", tp * m * vs), Buffer("y", "fp32", m * tp * vs)),
                   name=f"reorder_{tp}x{m}x{vs}")
    return Kernel(prog, ("x",), "y", (m, tp * vs), _no_weights, ((tp * m * vs,),),
                  ((tp * m * vs,),))


def link_stage(graph: OpGraph, b: Builder, nodes: tuple[OpNode, ...], *, name: str,
               sends: list = (), stage: int = 0, received: frozenset[str] = frozenset(),
               waits: tuple[str, ...] = (), keep_outputs: bool = False) -> CompiledStage:
    """Link the fragments ``b`` built for ``nodes`` (one stage's) plus a send of every
    buffer in ``sends`` ((consuming stage, producer node) pairs); buffers sent, received
    (from nodes named in ``received``) and, with ``keep_outputs``, every node's output are
    kept whole; ``waits``: the tokens of earlier stages' sends the stage's host waits for
    first. The memory plan is computed, not checked."""
    keep = {b.home(src)[0] for src in received}
    for dst, p in sends:
        home, off = b.home(p.name)
        size = graph.batch * graph.tokens * output_width(p.workload)
        b.frags.append(Fragment(f"hop{stage}.{p.name}", _hop(size, home, off, dst),
                                (("x", home, off),)))
        keep.add(home)
    if keep_outputs:
        keep |= {b.home(n.name)[0] for n in graph}
    roles = {n.role: n for n in nodes}
    # the logits: the LM head's, or what the model computes from them (``logits`` role)
    head, last = roles.get("logits") or roles.get("lm_head"), roles.get("next_token")
    logits, token = head.name if head else "", last.name if last else ""
    if head is not None and last is None and \
            "token" in family_of(head.workload).output_parts(graph, head):
        token = logits  # the LM head appends the token as its last column
    outputs = frozenset(b.home(x)[0] for x in (logits, token) if x) | frozenset(keep)
    linked = link(b.frags, b.hw, name=name, constants=frozenset(b.constants), outputs=outputs)
    linked.budget = replace(linked.budget, weights_data=sum(
        family_of(n.workload).weight_bytes(n.workload, b.hw, _point(b, n.name)) for n in nodes),
        kv_data=sum(family_of(n.workload).cache_bytes(n.workload, b.hw) for n in nodes))
    return CompiledStage(graph, b.hw, linked, b.choices, b.kernels,
                         b.home(logits)[0] if logits else "",
                         b.home(token)[0] if token else "", b.placement or "auto", waits)
