"""Family of the gemv and gemm families: the library GEMV plus host prologue/epilogue.

Core: ``placement=pim`` is ``sim.kernels.gemv`` with the point's options;
``placement=host`` is ``sim.kernels.gemv_host`` over the resident layout
(``search_spaces.gemv.resident_layout``: the weights are stored once, where the PIM path
keeps them), or ``sim.kernels.gemv_baseline`` when no PIM layout fits. From the
workload's attrs (names as the whole-model compiler binds them):

* ``prologue="rmsnorm"`` (attr ``eps``, constant ``norm_w`` [k]) or ``"layernorm"``
  (constant ``norm_b`` [k] too): ``x`` is normalised on the host into the device-typed
  buffer ``xn`` the core reads; the PIM streams wait for ``Signal("start")``, which the
  host gives after the prologue.
* ``bias=1`` (constant ``b`` [n]), ``epilogue="add"`` (input ``r`` [m, n]),
  ``epilogue="silu_mul"`` (output ``[m, n/2]``), ``epilogue="add_rmsnorm"`` (input ``r``,
  constant ``out_norm_w`` [n], attr ``out_eps``; output ``[m, 2n]``: the sum, then its
  RMS norm; ``add_layernorm`` the same with a LayerNorm, constant ``out_norm_b`` too),
  ``epilogue="rope"`` (constants ``cos``, ``sin`` [m, rope_rot]; attrs ``rope_heads``,
  ``rope_d``, optional ``rope_rot`` and ``rope_pairs``: q | k rotated in place;
  ``qknorm_rope`` normalises each head first, constants ``q_norm_w``, ``k_norm_w``
  [rope_d]; ``qklnorm_rope`` with LayerNorms, attr ``qk_per_head``: a scale row per
  head), ``epilogue="softcap"`` (attr ``cap``: ``cap * tanh(z / cap)``), ``"argmax"``
  (output ``[m, n + 1]``: the logits, then each row's argmax; ``softcap_argmax`` both) run
  in that order inside the core's one
  host op that finishes the result (the PIM reduction with its padding stripped, or the
  host multiply): one dispatch per GEMV.
"""

from __future__ import annotations

from dataclasses import replace

from autosched.codegen.rewrite import Rewrite, rewrite_body
from search_spaces import Workload
from search_spaces.gemv import point_opts, resident_layout
from sim.errors import AutoschedError
from sim.hardware import Hardware
from sim.isa import BufRef, HostOp, Signal, Wait, aff
from sim.kernels import Epilogue, Kernel, gemv, gemv_baseline
from sim.kernels.gemv_host import gemv_host
from sim.program import Buffer, Node, Program, Stream

from .attrs import EPILOGUES, PROLOGUES, gemv_attrs

__all__ = ["gemv_kernel"]


def _prologue(pro: str, m: int, k: int, kp: int,
              eps: float) -> tuple[list[Node], list[Buffer]]:
    """The norm ``pro`` of ``x`` [m, k] into ``xn`` whose rows are ``kp`` apart (several
    rows: normalised whole, then placed by one strided copy)."""
    attrs = (("eps", float(eps)),)
    consts = tuple(BufRef(c, aff(0), (k,)) for c in PROLOGUES[pro])
    x = BufRef("x", aff(0), (m, k))
    if kp == k or m == 1:
        return [HostOp(pro, (BufRef("xn", aff(0), (m, k)),), (x, *consts), attrs)], []
    norm = HostOp(pro, (BufRef("xr", aff(0), (m, k)),), (x, *consts), attrs)
    return [norm, _cols("xr", k, 0, k, "xn", kp, 0, m)], [Buffer("xr", "fp32", m * k)]


def _cols(src: str, src_w: int, lo: int, hi: int, dst: str, dst_w: int, col: int,
          m: int) -> HostOp:
    """Columns ``lo:hi`` of every row of ``src`` [m, src_w] into ``dst`` [m, dst_w] at
    ``col``, the rest of ``dst`` cleared: one strided copy."""
    out = BufRef(dst, aff(0), (m, dst_w))
    return HostOp("copy_cols", (out,), (BufRef(src, aff(0), (m, src_w)), out),
                  (("lo", lo), ("hi", hi), ("col", col), ("clear", 1)))


def _rename_x(body: tuple[Node, ...]) -> tuple[Node, ...]:
    return rewrite_body(body, Rewrite(buffers=lambda b: ("xn" if b == "x" else b, 0)))


def gemv_kernel(workload: Workload, point: dict, hw: Hardware) -> Kernel:
    """The kernel of one valid point of the gemv space (see the module docstring)."""
    pro, epi, bias = gemv_attrs(workload)
    d = workload.dims
    m, n, k = d["m"], d["n"], d["k"]
    tail = Epilogue(("bias",) * bool(bias) + EPILOGUES[epi],
                    float(workload.attr("out_eps", 1e-5)),
                    int(workload.attr("rope_heads", 0)), int(workload.attr("rope_d", 0)),
                    float(workload.attr("post_eps", 1e-5)), int(workload.attr("qk_heads", 0)),
                    float(workload.attr("qk_eps", 1e-6)), int(workload.attr("rope_rot", 0)),
                    str(workload.attr("rope_pairs", "half")), float(workload.attr("cap", 0)),
                    bool(int(workload.attr("qk_per_head", 0))))
    if point["placement"] == "pim":
        core = gemv(hw, n, k, m, point_opts(point), epilogue=tail)
    elif point["placement"] == "host":
        layout = resident_layout(workload, hw)
        core = (gemv_host(hw, n, k, m, layout, epilogue=tail) if layout is not None
                else gemv_baseline(hw, n, k, m, epilogue=tail))
    else:
        raise AutoschedError(f"placement {point['placement']!r} unknown: use pim or host")
    name = core.program.name + {"": "", "rmsnorm": "_rms", "layernorm": "_ln"}[pro] \
        + ("_bias" if bias else "") \
        + (f"_{epi}" * bool(epi))
    if not pro:
        return replace(core, program=replace(core.program, name=name))
    return _prologue_wrap(core, pro, m, k, float(workload.attr("eps", 1e-5)), name)


def _prologue_wrap(core: Kernel, pro: str, m: int, k: int, eps: float, name: str) -> Kernel:
    """``core`` reading the host-normalised ``xn`` instead of its input ``x``: the host
    normalises first and signals ``start``, which the PIM streams wait for."""
    prog = core.program
    xbuf = next(b for b in prog.buffers if b.name == "x")
    kp = core.padded_shapes[0][1]
    head: list[Node] = []
    streams: list[Stream] = []
    bufs = [b for b in prog.buffers if b.name != "x"]
    consts = PROLOGUES[pro]
    bufs += [replace(xbuf, name="xn"), Buffer("x", "fp32", m * k),
             *(Buffer(c, "fp32", k) for c in consts)]
    head, extra = _prologue(pro, m, k, kp, eps)
    bufs += extra
    if any(s.engine == "pim" for s in prog.streams):
        head.append(Signal("start"))
    for s in prog.streams:
        body = _rename_x(s.body)
        if s.engine == "pim":
            body = (Wait(("start",)), *body)
        if s.engine == "host":
            body = (*head, *body)
        streams.append(replace(s, body=body))
    return Kernel(Program(tuple(streams), tuple(bufs), name=name),
                  (*core.inputs, *consts), core.output, core.output_shape, core.place,
                  input_shapes=(*core.input_shapes, *((k,),) * len(consts)),
                  padded_shapes=((m, k), *core.padded_shapes[1:], *((k,),) * len(consts)),
                  staged=core.staged)
