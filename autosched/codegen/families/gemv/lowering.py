"""Lowering of the gemv and gemm families: the library GEMV plus host prologue/epilogue.

Core: ``placement=pim`` is ``sim.kernels.gemv`` with the point's options (padding kept,
``strip=False``); ``placement=host`` is ``sim.kernels.gemv_host`` over the resident layout
(``search_spaces.gemv.resident_layout``: the weights are stored once, where the PIM path
keeps them), or ``sim.kernels.gemv_baseline`` when no PIM layout fits. Around it, host ops
from the workload's attrs (names as the whole-model compiler binds them):

* ``prologue="rmsnorm"`` (attr ``eps``, constant ``norm_w`` [k]): ``x`` is normalised on
  the host into the device-typed buffer ``xn`` the core reads; the PIM streams wait for
  ``Signal("start")``, which the host gives after the prologue.
* ``bias=1`` (constant ``b`` [n]), ``epilogue="add"`` (input ``r`` [m, n]),
  ``epilogue="silu_mul"`` (output ``[m, n/2]``) run in that order on the core's result,
  the first one fused with stripping the padding; the last one writes ``y``.
"""

from __future__ import annotations

from dataclasses import replace

from autosched.codegen.lowering import Lowering
from autosched.codegen.rewrite import Rewrite, rewrite_body
from search_spaces import Space, Workload
from search_spaces.gemv import gemv_default, gemv_library, gemv_space, point_opts, resident_layout
from sim.errors import AutoschedError
from sim.hardware import Hardware
from sim.isa import BufRef, HostOp, Signal, Wait, aff
from sim.kernels import Kernel, gemv, gemv_baseline
from sim.kernels.gemv_host import gemv_host
from sim.program import Buffer, Node, Program, Stream

from .attrs import gemv_attrs
from .bound import gemv_bound

__all__ = ["GemvLowering"]


def _prologue(m: int, k: int, kp: int, eps: float) -> tuple[list[Node], list[Buffer]]:
    """rmsnorm of ``x`` [m, k] into ``xn`` whose rows are ``kp`` apart (several rows:
    normalised whole, then placed by one strided copy)."""
    attrs = (("eps", float(eps)),)
    if kp == k or m == 1:
        return [HostOp("rmsnorm", (BufRef("xn", aff(0), (m, k)),),
                       (BufRef("x", aff(0), (m, k)), BufRef("norm_w", aff(0), (k,))), attrs)], []
    norm = HostOp("rmsnorm", (BufRef("xr", aff(0), (m, k)),),
                  (BufRef("x", aff(0), (m, k)), BufRef("norm_w", aff(0), (k,))), attrs)
    return [norm, _cols("xr", k, 0, k, "xn", kp, 0, m)], [Buffer("xr", "fp32", m * k)]


def _cols(src: str, src_w: int, lo: int, hi: int, dst: str, dst_w: int, col: int,
          m: int) -> HostOp:
    """Columns ``lo:hi`` of every row of ``src`` [m, src_w] into ``dst`` [m, dst_w] at
    ``col``, the rest of ``dst`` cleared: one strided copy."""
    out = BufRef(dst, aff(0), (m, dst_w))
    return HostOp("copy_cols", (out,), (BufRef(src, aff(0), (m, src_w)), out),
                  (("lo", lo), ("hi", hi), ("col", col), ("clear", 1)))


def _epilogue(m: int, n: int, src: str, stride: int, epi: str, bias: bool
              ) -> tuple[list[Node], list[Buffer]]:
    """Host ops turning ``src`` (rows ``stride`` apart, first ``n`` valid) into ``y``.

    Every stage runs once on whole tensors: with several rows, padding is stripped and
    silu_mul's halves are separated by strided copies (``copy_cols``) first.
    """
    stages = ([("add", "b")] if bias else []) + ([("add", "r")] if epi == "add" else [])
    stages += [("silu_mul", "")] if epi == "silu_mul" else []
    stages = stages or [("copy", "")]
    nodes: list[Node] = []
    bufs: list[Buffer] = []
    cur = src
    if m > 1 and stride != n:
        nodes.append(_cols(src, stride, 0, n, "ts", n, 0, m))
        bufs.append(Buffer("ts", "fp32", m * n))
        cur = "ts"
    for i, (kind, other) in enumerate(stages):
        dst = "y" if i == len(stages) - 1 else f"t{i}"
        width = n // 2 if kind == "silu_mul" else n
        if kind == "silu_mul":
            if m > 1:
                nodes += [_cols(cur, n, 0, width, "ga", width, 0, m),
                          _cols(cur, n, width, n, "gb", width, 0, m)]
                bufs += [Buffer("ga", "fp32", m * width), Buffer("gb", "fp32", m * width)]
                ins = (BufRef("ga", aff(0), (m, width)), BufRef("gb", aff(0), (m, width)))
            else:
                ins = (BufRef(cur, aff(0), (1, width)), BufRef(cur, aff(width), (1, width)))
        elif kind == "copy":
            ins = (BufRef(cur, aff(0), (m, n)),)
        elif other == "b":
            ins = (BufRef(cur, aff(0), (m, n)), BufRef("b", aff(0), (n,)))
        else:
            ins = (BufRef(cur, aff(0), (m, n)), BufRef("r", aff(0), (m, n)))
        nodes.append(HostOp(kind, (BufRef(dst, aff(0), (m, width)),), ins))
        bufs.append(Buffer(dst, "fp32", m * width))
        cur = dst
    return nodes, bufs


def _rename_x(body: tuple[Node, ...]) -> tuple[Node, ...]:
    return rewrite_body(body, Rewrite(buffers=lambda b: ("xn" if b == "x" else b, 0)))


class GemvLowering(Lowering):
    """gemv and gemm: the space of ``search_spaces.gemv``, lowered as the module says."""

    families = ("gemv", "gemm")

    def space(self, workload: Workload, hw: Hardware) -> Space:
        gemv_attrs(workload)
        return gemv_space(workload, hw)

    def default(self, workload: Workload, hw: Hardware) -> dict:
        return gemv_default(workload, hw)

    def library(self, workload: Workload, hw: Hardware) -> dict | None:
        return gemv_library(workload, hw)

    def bound(self, workload: Workload, hw: Hardware) -> float:
        return gemv_bound(workload, hw)

    def tensors(self, workload: Workload) -> tuple[str, ...]:
        return ("W",)

    def lower(self, workload: Workload, point: dict, hw: Hardware) -> Kernel:
        pro, epi, bias = gemv_attrs(workload)
        d = workload.dims
        m, n, k = d["m"], d["n"], d["k"]
        if point["placement"] == "pim":
            core = gemv(hw, n, k, m, point_opts(point), strip=False)
        elif point["placement"] == "host":
            layout = resident_layout(workload, hw)
            core = (gemv_host(hw, n, k, m, layout) if layout is not None
                    else _rename_out(gemv_baseline(hw, n, k, m)))
        else:
            raise AutoschedError(f"placement {point['placement']!r} unknown: use pim or host")
        return _wrap(core, m, n, k, pro, epi, bias, float(workload.attr("eps", 1e-5)))


def _rename_out(core: Kernel) -> Kernel:
    """The baseline with its result renamed ``z``, so the epilogue can write ``y``."""
    ren = Rewrite(buffers=lambda b: ("z" if b == "y" else b, 0))
    streams = tuple(replace(s, body=rewrite_body(s.body, ren)) for s in core.program.streams)
    bufs = tuple(replace(b, name="z") if b.name == "y" else b for b in core.program.buffers)
    return replace(core, program=Program(streams, bufs, name=core.program.name), output="z")


def _wrap(core: Kernel, m: int, n: int, k: int, pro: bool, epi: str, bias: bool,
          eps: float) -> Kernel:
    prog = core.program
    xbuf = next(b for b in prog.buffers if b.name == "x")
    kp = core.padded_shapes[0][1]
    head: list[Node] = []
    streams: list[Stream] = []
    bufs = [b for b in prog.buffers if b.name not in ("x", "y")]
    if pro:
        bufs += [replace(xbuf, name="xn"), Buffer("x", "fp32", m * k),
                 Buffer("norm_w", "fp32", k)]
        head, extra = _prologue(m, k, kp, eps)
        bufs += extra
    else:
        bufs.append(xbuf)
    pim = [s for s in prog.streams if s.engine == "pim"]
    if pro and pim:
        head.append(Signal("start"))
    for s in prog.streams:
        body = _rename_x(s.body) if pro else s.body
        if s.engine == "pim" and pro:
            body = (Wait(("start",)), *body)
        if s.engine == "host":
            tail, tbufs = _epilogue(m, n, core.output, core.output_shape[1], epi, bias)
            body = (*head, *body, *tail)
            bufs += tbufs
        streams.append(replace(s, body=body))
    inputs: list[tuple[str, tuple[int, ...], tuple[int, ...]]] = [
        ("x", (m, k), (m, k) if pro else core.padded_shapes[0])]
    if epi == "add":
        inputs.append(("r", (m, n), (m, n)))
        bufs.append(Buffer("r", "fp32", m * n))
    if bias:
        inputs.append(("b", (n,), (n,)))
        bufs.append(Buffer("b", "fp32", n))
    if pro:
        inputs.append(("norm_w", (k,), (k,)))
    name = prog.name + ("_rms" if pro else "") + ("_bias" if bias else "") + (f"_{epi}" * bool(epi))
    out_n = n // 2 if epi == "silu_mul" else n
    return Kernel(Program(tuple(streams), tuple(bufs), name=name),
                  tuple(i[0] for i in inputs), "y", (m, out_n), core.place,
                  input_shapes=tuple(i[1] for i in inputs),
                  padded_shapes=tuple(i[2] for i in inputs), staged=core.staged)

