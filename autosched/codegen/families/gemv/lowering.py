"""Lowering of the gemv and gemm families: the library GEMV plus host prologue/epilogue.

Core: ``placement=pim`` is ``sim.kernels.gemv`` with the point's options (padding kept,
``strip=False``); ``placement=host`` is ``sim.kernels.gemv_baseline``. Around it, host ops
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
from search_spaces.gemv import gemv_default, gemv_library, gemv_space, point_opts
from sim.errors import AutoschedError
from sim.hardware import Hardware
from sim.isa import BufRef, HostOp, Signal, Wait, aff
from sim.kernels import Kernel, gemv, gemv_baseline
from sim.kernels.base import loop
from sim.program import Buffer, Node, Program, Stream

from .attrs import gemv_attrs
from .bound import gemv_bound

__all__ = ["GemvLowering"]


def _prologue(m: int, k: int, kp: int, eps: float) -> list[Node]:
    """rmsnorm of ``x`` [m, k] into ``xn`` whose rows are ``kp`` apart."""
    attrs = (("eps", float(eps)),)
    if kp == k:
        return [HostOp("rmsnorm", (BufRef("xn", aff(0), (m, k)),),
                       (BufRef("x", aff(0), (m, k)), BufRef("norm_w", aff(0), (k,))), attrs)]
    return loop("b", m, (HostOp("rmsnorm", (BufRef("xn", aff(0, b=kp), (1, k)),),
                                (BufRef("x", aff(0, b=k), (1, k)),
                                 BufRef("norm_w", aff(0), (k,))), attrs),))


def _epilogue(m: int, n: int, src: str, stride: int, epi: str, bias: bool
              ) -> tuple[list[Node], list[Buffer]]:
    """Host ops turning ``src`` (rows ``stride`` apart, first ``n`` valid) into ``y``.

    A stage runs once on whole tensors when its operands are contiguous ``[m, n]``, else
    once per row (stripping padding, or the per-row halves of silu_mul).
    """
    stages = ([("add", "b")] if bias else []) + ([("add", "r")] if epi == "add" else [])
    stages += [("silu_mul", "")] if epi == "silu_mul" else []
    stages = stages or [("copy", "")]
    nodes: list[Node] = []
    bufs: list[Buffer] = []
    cur, cur_stride = src, stride
    for i, (kind, other) in enumerate(stages):
        dst = "y" if i == len(stages) - 1 else f"t{i}"
        width = n // 2 if kind == "silu_mul" else n
        per_row = m > 1 and (kind == "silu_mul" or cur_stride != n)

        def win(buf: str, st: int, w: int, off: int = 0, _row: bool = per_row) -> BufRef:
            return (BufRef(buf, aff(off, b=st), (1, w)) if _row
                    else BufRef(buf, aff(off), (m, w)))

        if kind == "silu_mul":
            ins = (win(cur, cur_stride, width), win(cur, cur_stride, width, width))
        elif kind == "copy":
            ins = (win(cur, cur_stride, n),)
        elif other == "b":
            ins = (win(cur, cur_stride, n), BufRef("b", aff(0), (n,)))
        else:
            ins = (win(cur, cur_stride, n), win("r", n, n))
        nodes += loop("b", m if per_row else 1, (HostOp(kind, (win(dst, width, width),), ins),))
        bufs.append(Buffer(dst, "fp32", m * width))
        cur, cur_stride = dst, width
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
            core = gemv_baseline(hw, n, k, m)
            core = _rename_out(core)
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
        head = _prologue(m, k, kp, eps)
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
                  padded_shapes=tuple(i[2] for i in inputs))

