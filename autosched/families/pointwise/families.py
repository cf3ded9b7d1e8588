"""The point-wise families, one class each: RMSNorm, rotary embedding, element-wise ops,
the embedding lookup, argmax, and ``extern`` (an op of the model no family covers, run on the host).

All share the placement space of ``search_spaces.pointwise`` (host, plus the banks for
element-wise ops the device computes in-bank), keep nothing in the banks, and are bounded
by their best placement's program (:mod:`.bound`).
"""

from __future__ import annotations

import abc
from typing import Any, ClassVar

import numpy as np

from search_spaces import Space, Workload
from search_spaces.pointwise import (
    DEFAULT_EPS,
    pointwise_default,
    pointwise_library,
    pointwise_space,
)
from sim.activations import soft_cap
from sim.hardware import Hardware
from sim.kernels import Kernel

from ..base import Family, Option
from ..common import (
    activate,
    head_split,
    layer_norm,
    norm_bias,
    norm_weight,
    rms_norm,
    rope_tables,
    rotate,
)
from .bound import pointwise_bound
from .kernels import binary, fn_attrs, one_host_op, pim_kernel, shapes_of

__all__ = ["BUFFER", "POINTWISE", "POSITIONS", "ArgmaxFamily", "ElementwiseFamily",
           "EmbeddingFamily", "ExternFamily", "RmsNormFamily", "RopeFamily", "is_table_leaf",
           "rope_constants", "rope_reference"]

Arr = np.ndarray


class _Pointwise(Family):
    """Shared by the point-wise families: the placement space, host op or in-bank kernel."""

    def space(self, workload: Workload, hw: Hardware) -> Space:
        return pointwise_space(workload, hw)

    def default(self, workload: Workload, hw: Hardware) -> dict:
        return pointwise_default(workload, hw)

    def library(self, workload: Workload, hw: Hardware) -> dict | None:
        return pointwise_library(workload, hw)

    def lower(self, workload: Workload, point: dict, hw: Hardware) -> Kernel:
        if point["placement"] == "pim":
            return pim_kernel(workload, hw)
        return self.host(workload, hw)

    def bound(self, workload: Workload, hw: Hardware) -> float:
        return pointwise_bound(workload, hw, self)

    @abc.abstractmethod
    def host(self, workload: Workload, hw: Hardware) -> Kernel:
        """The family's one host op over every row."""


class RmsNormFamily(_Pointwise):
    """``y = x / sqrt(mean(x^2) + eps) * w`` over the last dim (attr ``eps``)."""

    ops: ClassVar[tuple[str, ...]] = ("rmsnorm",)

    def recognisers(self) -> tuple:
        from .patterns import rmsnorm

        return ((30, rmsnorm),)

    def host(self, workload: Workload, hw: Hardware) -> Kernel:
        m, n = workload.dims["m"], workload.dims["n"]
        eps = float(workload.attr("eps", DEFAULT_EPS))
        return one_host_op("rmsnorm_host", "rmsnorm", [("x", (m, n), (m, n)),
                                                       ("w", (n,), (n,))], (m, n),
                           (("eps", eps),))

    def constants(self, source: Any, node: Any, positions: Arr) -> dict[str, Arr]:
        return {"w": norm_weight(source, node, "w", node.workload.dims["n"])}

    def reference(self, node, ops, tensors, env) -> Arr:
        return rms_norm(ops["x"], tensors["w"], float(node.workload.attr("eps", DEFAULT_EPS)))


class RopeFamily(_Pointwise):
    """RoPE of q | k (``h`` heads of ``d``) by the rows' position tables: the first attr
    ``rot`` columns of each head (default all: partial rotary), pairs of the two halves
    of those (rotate-half) or neighbours (attr ``pairs="interleaved"``); attr ``tables``:
    the tables recomputed as the model's graph computes them (constants ``t0``...)."""

    ops: ClassVar[tuple[str, ...]] = ("rope",)

    def recognisers(self) -> tuple:
        from .patterns import partial_rope, rope

        return ((19, partial_rope), (20, rope))

    def finish(self, g: Any, matches: list) -> list:
        from .patterns import merge_ropes

        return merge_ropes(g, matches)

    def host(self, workload: Workload, hw: Hardware) -> Kernel:
        m, h, hd = workload.dims["m"], workload.dims["h"], workload.dims["d"]
        r = int(workload.attr("rot", hd))
        tab = ((m, r), (m, 1, r))
        pairs = str(workload.attr("pairs", "half"))
        attrs = (("pairs", pairs),) if pairs != "half" else ()
        return one_host_op("rope_host", "rope", [("x", (m, h, hd), (m, h, hd)),
                                                 ("cos", *tab), ("sin", *tab)], (m, h, hd),
                           attrs)

    def output_width(self, workload: Workload) -> int:
        return workload.dims["h"] * workload.dims["d"]

    def output_parts(self, graph, node) -> dict[str, tuple[int, int]]:
        if self.reads_whole(node):  # one tensor rotated: one output
            return super().output_parts(graph, node)
        q, kv = head_split(graph, node)
        return {"q": (0, q), "k": (q, q + kv)}

    def labelled_operands(self, node) -> dict[str, tuple[str, ...]] | None:
        return None if self.reads_whole(node) else {"x": ("q", "k")}

    def reads_whole(self, node) -> bool:
        return node.role == "rotary"  # one tensor rotated (partial rotary), not q | k

    def constants(self, source: Any, node: Any, positions: Arr) -> dict[str, Arr]:
        w = node.workload
        cos, sin = rope_constants(source, node, positions, int(w.attr("rot", w.dims["d"])),
                                  w.attr("tables"))
        return {"cos": cos, "sin": sin}

    def reference(self, node, ops, tensors, env) -> Arr:
        w = node.workload
        m, h, d = (w.dims[k] for k in ("m", "h", "d"))
        x = ops["x"].reshape(m, h, d)
        return rope_reference(x, env, int(w.attr("rot", d)), str(w.attr("pairs", "half"))
                              ).reshape(m, h * d)


def rope_constants(source: Any, node: Any, positions: Arr, rot: int,
                   key: object = None) -> tuple[Arr, Arr]:
    """cos, sin ``[len(positions), rot]`` of a rope over ``rot`` columns of each head:
    recomputed as the model's graph computes them where the capture recorded that
    (table function ``key``, its constants the node's ``t0``, ``t1``... in order), else
    from the node's rotary module (:func:`~..common.rope_tables`)."""
    if not key:
        return rope_tables(source, node, positions, rot)
    from .fallback import tables_of

    leaves = sorted((int(local[1:]), name) for local, name in node.params
                    if is_table_leaf(local))
    return tables_of(str(key), [_constant(source, n, positions) for _, n in leaves])


def is_table_leaf(local: str) -> bool:
    """Whether a node's tensor name ``local`` is a constant of its rotary table function
    (``t0``, ``t1``...: :func:`rope_constants`)."""
    return local[:1] == "t" and local[1:].isdigit()


def rope_reference(x: Arr, env: Any, rot: int, pairs: str) -> Arr:
    """float64 rope of ``x`` [rows, heads, d]: the first ``rot`` columns of each head by
    the step's tables, rotate-half or neighbouring ``pairs`` (the same frequencies)."""
    cos, sin = env.tables(rot)
    head = x[..., :rot]
    if pairs == "interleaved":
        cos, sin = (np.repeat(t[:, : rot // 2], 2, axis=1) for t in (cos, sin))
        rot_x = np.stack([-head[..., 1::2], head[..., 0::2]], axis=-1).reshape(head.shape)
        head = head * cos[:, None] + rot_x * sin[:, None]
    else:
        head = rotate(head, cos, sin)
    return np.concatenate([head, x[..., rot:]], axis=-1)


_FNS = {"add": lambda a, b: a + b, "mul": lambda a, b: a * b}


def _elementwise(fn: str, a: Arr, b: Arr | None, w: Workload) -> Arr:
    """float64 semantics of an elementwise fn."""
    if fn in _FNS:
        return _FNS[fn](a, b)
    if fn == "scale":
        return a * float(w.attr("alpha"))
    if fn == "softcap":
        return soft_cap(a, float(w.attr("cap")))
    return activate(fn, np.concatenate([a, b], axis=-1) if b is not None else a)


class ElementwiseFamily(_Pointwise):
    """``y = a (add|mul) b`` or ``y = f(a)`` (attr ``fn``); may run in the banks."""

    ops: ClassVar[tuple[str, ...]] = ("elementwise",)

    def recognisers(self) -> tuple:
        from .patterns import activation, elementwise, scale

        return ((65, activation), (70, elementwise), (75, scale))

    def host(self, workload: Workload, hw: Hardware) -> Kernel:
        m, n = workload.dims["m"], workload.dims["n"]
        names = ("a", "b") if binary(workload) else ("a",)
        return one_host_op("elementwise_host", str(workload.attr("fn")),
                           [(b, (m, n), (m, n)) for b in names], (m, n), fn_attrs(workload))

    def operand_names(self, node) -> tuple[str, ...]:
        return ("a", "b") if binary(node.workload) else ("a",)

    def options(self, workload: Workload, hw: Hardware) -> tuple[Option, ...]:
        b = self.bound(workload, hw)  # may run in the banks: its resource use not split out
        return (Option(0.0, b, b), Option(0.0, 0.0, b))

    def reference(self, node, ops, tensors, env) -> Arr:
        return _elementwise(str(node.workload.attr("fn")), ops["a"], ops.get("b"),
                            node.workload)


class EmbeddingFamily(_Pointwise):
    """Rows of the table for the step's token ids; with attr ``epilogue="rmsnorm"`` also
    their RMS norm beside them (attr ``out_eps``, constant ``out_norm_w``; ``[m, 2n]``),
    with ``"layernorm"`` their LayerNorm (constant ``out_norm_b`` too)."""

    ops: ClassVar[tuple[str, ...]] = ("embedding",)
    reads_tokens: ClassVar[bool] = True

    def recognisers(self) -> tuple:
        from .patterns import embedding

        return ((50, embedding),)

    def host(self, workload: Workload, hw: Hardware) -> Kernel:
        m, n, v = workload.dims["m"], workload.dims["n"], workload.dims["v"]
        ins, out, attrs = [("ids", (m,), (m,)), ("table", (v, n), (v, n))], (m, n), ()
        if self.writes_norm(workload):
            ln = workload.attr("epilogue") == "layernorm"
            ins += [(c, (n,), (n,)) for c in ("out_norm_w", "out_norm_b")[:1 + ln]]
            out = (m, 2 * n)
            attrs = (("epi", f"{workload.attr('epilogue')}_cat"),
                     ("eps", float(workload.attr("out_eps", DEFAULT_EPS))))
        return one_host_op("embedding_host", "embedding", ins, out, attrs,
                           dtypes={"table": hw.pim.dtype})  # the table: the device's type

    def writes_norm(self, workload: Workload) -> bool:
        return workload.attr("epilogue") in ("rmsnorm", "layernorm")

    def output_width(self, workload: Workload) -> int:
        return workload.dims["n"] * (2 if self.writes_norm(workload) else 1)

    def output_parts(self, graph, node) -> dict[str, tuple[int, int]]:
        n = node.workload.dims["n"]
        if self.writes_norm(node.workload):
            return {"res": (0, n), "norm": (n, 2 * n)}
        return {"out": (0, n)}

    def operand_names(self, node) -> tuple[str, ...]:
        return ()

    def table_bytes(self, workload: Workload, hw: Hardware) -> int:
        return workload.dims["v"] * workload.dims["n"] * hw.elem_bytes

    def constants(self, source: Any, node: Any, positions: Arr) -> dict[str, Arr]:
        out = {"table": source.get(node.param("table"))}
        if self.writes_norm(node.workload):
            n = node.workload.dims["n"]
            out["out_norm_w"] = norm_weight(source, node, "out_norm_w", n)
            if node.workload.attr("epilogue") == "layernorm":
                out["out_norm_b"] = norm_bias(source, node, "out_norm_b", n)
        return out

    def reference(self, node, ops, tensors, env) -> Arr:
        x = np.asarray(tensors["table"], np.float64)[ops["ids"][:, 0].astype(np.int64)]
        if self.writes_norm(node.workload):
            eps = float(node.workload.attr("out_eps", DEFAULT_EPS))
            norm = layer_norm(x, tensors["out_norm_w"], tensors["out_norm_b"], eps) \
                if node.workload.attr("epilogue") == "layernorm" else \
                rms_norm(x, tensors["out_norm_w"], eps)
            x = np.concatenate([x, norm], axis=1)
        return x


class ArgmaxFamily(_Pointwise):
    """Each row's index of its largest value (the next token), ``[m, 1]``."""

    ops: ClassVar[tuple[str, ...]] = ("argmax",)

    def recognisers(self) -> tuple:
        from .patterns import argmax

        return ((60, argmax),)

    def host(self, workload: Workload, hw: Hardware) -> Kernel:
        m, n = workload.dims["m"], workload.dims["n"]
        return one_host_op("argmax_host", "argmax", [("x", (m, n), (m, n))], (m,))

    def output_width(self, workload: Workload) -> int:
        return 1

    def reference(self, node, ops, tensors, env) -> Arr:
        return np.argmax(ops["x"], axis=-1).astype(np.float64)[:, None]


class ExternFamily(_Pointwise):
    """An op of the model no family covers, run on the host as the model computes it:
    attr ``fn`` names the callable registered with ``sim.host_ops.register_extern``,
    ``ins`` and ``params`` the shapes it reads (activations ``x0``.., parameters ``p0``..),
    ``flops`` its cost."""

    ops: ClassVar[tuple[str, ...]] = ("extern",)
    reshapes_inputs: ClassVar[bool] = True
    claims_leftovers: ClassVar[bool] = True

    def leftover(self, g: Any, node: Any) -> Any:
        from .fallback import host_match

        return host_match(g, node)

    def host(self, workload: Workload, hw: Hardware) -> Kernel:
        ins = [(f"x{i}", s) for i, s in enumerate(shapes_of(workload.attr("ins", "")))]
        ins += [(f"p{i}", s) for i, s in enumerate(shapes_of(workload.attr("params", "")))]
        attrs = (("fn", str(workload.attr("fn"))), ("flops", float(workload.attr("flops", 0))))
        return one_host_op("extern_host", "extern", [(b, s, s) for b, s in ins],
                           (workload.dims["m"], workload.dims["n"]), attrs)

    def operand_names(self, node) -> tuple[str, ...]:
        return tuple(f"x{i}" for i in range(len(node.inputs)))

    def unclaimed_op(self, workload: Workload) -> str | None:
        return str(workload.attr("fn"))

    def constants(self, source: Any, node: Any, positions: Arr) -> dict[str, Arr]:
        """Each parameter the op reads: a model tensor, a module buffer (``buffer:``
        prefix) or the step's positions (``@positions``), cut to the shape it reads."""
        sizes = [int(np.prod([int(v) for v in s.split("x")]))
                 for s in str(node.workload.attr("params", "")).split(",") if s]
        return {local: _constant(source, name, positions)[:sizes[int(local[1:])]]
                for local, name in node.params}

    def reference(self, node, ops, tensors, env) -> Arr:
        from sim.host_ops import EXTERNS

        args = [ops[k] for k in self.operand_names(node)]
        args += [tensors[k] for k, _ in node.params]
        out = EXTERNS[str(node.workload.attr("fn"))](*args)
        return np.asarray(out, np.float64).reshape(node.workload.dims["m"], -1)


POSITIONS = "@positions"  # an extern op's constant holding the step's positions
BUFFER = "buffer:"  # prefix of an extern op's constant read from a module buffer


def _constant(source: Any, name: str, positions: Arr) -> Arr:
    if name == POSITIONS:
        return np.asarray(positions, np.float32)
    if name.startswith(BUFFER):
        path, _, attr = name[len(BUFFER):].rpartition(".")
        buf = source.module(path).get_buffer(attr)
        return buf.detach().float().cpu().numpy().reshape(-1)
    return source.get(name)


POINTWISE: tuple[Family, ...] = (RmsNormFamily(), RopeFamily(), ElementwiseFamily(),
                                 EmbeddingFamily(), ArgmaxFamily(), ExternFamily())
