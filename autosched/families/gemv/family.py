"""The ``gemv`` and ``gemm`` family: ``y[m, n] = x[m, k] @ W[n, k]^T`` with the host
prologue and epilogues fusion gives it.

Beside its kernel (:mod:`.lowering`) it answers for the weights: their bytes in the
banks, the layout every step reads them in (:mod:`.resident`), the denser layouts a step
takes when its memory plan overflows (:mod:`.fit`), its output's columns under each
epilogue, the graph rewrites of fusion (:mod:`.fusion`), and its reference arithmetic.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from autosched.ir import PartitionError
from search_spaces import Schedule, Space, Workload
from search_spaces.gemv import gemv_default, gemv_library, gemv_space
from search_spaces.pointwise import DEFAULT_EPS
from sim.activations import ACTIVATIONS, soft_cap
from sim.errors import AutoschedError
from sim.hardware import Hardware
from sim.kernels import Kernel

from ..base import Family, Option
from ..common import (
    activate,
    gated,
    head_split,
    joined,
    layer_norm,
    norm_bias,
    norm_weight,
    rms_norm,
)
from ..pointwise.families import rope_constants, rope_reference
from . import fit, fusion
from .attrs import RESIDUAL_EPILOGUES, gemv_attrs, has_qk_norm, has_stage
from .formats import dequant_site, format_device, format_of, format_terms, tag_format
from .lowering import gemv_kernel
from .resident import pin_layout

__all__ = ["GemvFamily"]

Arr = np.ndarray


class GemvFamily(Family):
    """gemv and gemm: the space of ``search_spaces.gemv``, lowered by :mod:`.lowering`."""

    ops: ClassVar[tuple[str, ...]] = ("gemv", "gemm")
    in_banks: ClassVar[bool] = True
    memory_kind: ClassVar[str | None] = "weights"

    # A workload of an integer weight format the units take is laid out on the format's
    # view of the device (``formats.format_device``): every question below asks it.
    def space(self, workload: Workload, hw: Hardware) -> Space:
        gemv_attrs(workload)
        return gemv_space(workload, format_device(workload, hw))

    def default(self, workload: Workload, hw: Hardware) -> dict:
        dev = format_device(workload, hw)
        if dev is not hw and workload.op == "gemm":  # the host reads packed codes: its side
            t = format_terms(workload, hw)            # weighed at their bytes
            host = self.side_point(workload, hw, "host") if t["host"] < t["pim"] else None
            if host is not None:
                return host
        return gemv_default(workload, dev)

    def library(self, workload: Workload, hw: Hardware) -> dict | None:
        return gemv_library(workload, format_device(workload, hw))

    def lower(self, workload: Workload, point: dict, hw: Hardware) -> Kernel:
        dev = format_device(workload, hw)
        kernel = gemv_kernel(workload, point, dev)
        return kernel if dev is hw else tag_format(kernel, format_of(workload).kind)

    def bound(self, workload: Workload, hw: Hardware) -> float:
        return format_terms(workload, hw)["bound"]

    def options(self, workload: Workload, hw: Hardware) -> tuple[Option, ...]:
        t = format_terms(workload, hw)
        dev = max(t["pim_columns"], t["pim_banks"], t["pim_bus"])  # refresh: per window
        host_host = t["host"] - t["host_weights"]  # a host GEMV's reads need no input
        return (Option(dev, t["pim"] - dev, t["pim"]),
                Option(t["host_weights"], host_host, host_host))

    def recognisers(self) -> tuple:
        from .pattern import linear
        from .split import packed

        return ((39, packed), (40, linear))

    def side_point(self, workload: Workload, hw: Hardware, side: str) -> dict | None:
        try:
            return gemv_default(workload, format_device(workload, hw), placement=side)
        except AutoschedError:
            return None

    # ---- the workload in a step ----------------------------------------------------
    def pin(self, workload: Workload, hw: Hardware, db: Any) -> Workload:
        return pin_layout(workload, hw, db, format_device(workload, hw))

    def shard(self, workload: Workload, dims: tuple[str, ...], tp: int) -> Workload:
        w = super().shard(workload, dims, tp)
        heads = w.attr("rope_heads")
        if heads is None:  # a rotating qkv_proj's share holds 1/tp of q's and k's heads
            return w
        attrs = {**dict(w.attrs), "rope_heads": int(heads) // tp}
        if w.attr("qk_per_head"):
            raise PartitionError(f"{w.key}: q/k norms with a scale per head do not split "
                                 "over tensor-parallel devices; use a pipeline partition "
                                 "(1xP)")
        if w.attr("qk_heads") is not None:
            attrs["qk_heads"] = int(w.attr("qk_heads")) // tp
        return Workload.make(w.op, w.dtype, attrs, **w.dims)

    # ---- memory --------------------------------------------------------------------
    def weight_bytes(self, workload: Workload, hw: Hardware, point: dict | None = None) -> int:
        """Packed codes, scales and zero points when the banks hold the format; else
        ``pim.dtype`` values (a format the units do not take is dequantized at load)."""
        n, k = workload.dims["n"], workload.dims["k"]
        if dequant_site(workload, hw) == "bank":
            return format_of(workload).weight_bytes(n, k)
        return n * k * hw.elem_bytes

    def fit_memory(self, step: Any) -> dict[str, Schedule]:
        return fit.dense_schedules(step, self.ops)

    def follow_fit(self, graph: Any, one: Any) -> dict[str, Workload]:
        layouts = fit.fitted_layouts(one, self.ops)
        moved = {n.name: fit.follow(n.workload, layouts) for n in graph
                 if n.workload.op in self.ops} if layouts else {}
        return {k: w for k, w in moved.items() if w is not None}

    # ---- graph ---------------------------------------------------------------------
    def writes_norm(self, workload: Workload) -> bool:
        """Its output is the residual sum, then that sum's RMS norm (``add_rmsnorm``) or
        LayerNorm (``add_layernorm``)."""
        epi = workload.attr("epilogue")
        return has_stage(epi, "rmsnorm_cat") or has_stage(epi, "layernorm_cat")

    def output_width(self, workload: Workload) -> int:
        n, epi = workload.dims["n"], workload.attr("epilogue")
        if self.writes_norm(workload):
            return 2 * n
        return n // 2 if gated(epi) else n + 1 if has_stage(epi, "argmax_cat") else n

    def output_parts(self, graph: Any, node: Any) -> dict[str, tuple[int, int]]:
        w, width = node.workload, self.output_width(node.workload)
        if node.role == "qkv_proj":
            q, kv = head_split(graph, node)
            return {"q": (0, q), "k": (q, q + kv), "v": (q + kv, q + 2 * kv)}
        if node.role == "gate_up" and not gated(w.attr("epilogue")):
            return {"gate": (0, width // 2), "up": (width // 2, width)}
        if self.writes_norm(w):
            return {"res": (0, width // 2), "norm": (width // 2, width)}
        if has_stage(w.attr("epilogue"), "argmax_cat"):
            return {"out": (0, width - 1), "token": (width - 1, width)}
        return super().output_parts(graph, node)

    def operand_names(self, node: Any) -> tuple[str, ...]:
        return ("x", "r") if node.workload.attr("epilogue") in RESIDUAL_EPILOGUES \
            else ("x",)

    def fuse(self, graph: Any, plan: dict) -> Any:
        return fusion.fuse(graph, plan)

    def fuse_weights(self, graph: Any, plan: dict, weights: dict) -> dict:
        return fusion.fuse_weights(graph, plan, weights)

    # ---- numbers -------------------------------------------------------------------
    def tensors(self, workload: Workload) -> tuple[str, ...]:
        return ("W",)

    def weights(self, source: Any, node: Any) -> dict[str, Arr]:
        return {"W": joined(source, node, "W")}

    def constants(self, source: Any, node: Any, positions: Arr) -> dict[str, Arr]:
        w, out = node.workload, {}
        if w.attr("bias", 0):
            out["b"] = joined(source, node, "b")
        if w.attr("prologue"):
            out["norm_w"] = norm_weight(source, node, "norm_w", w.dims["k"])
        if w.attr("prologue") == "layernorm":
            out["norm_b"] = norm_bias(source, node, "norm_b", w.dims["k"])
        if has_stage(w.attr("epilogue"), "rope"):
            out["cos"], out["sin"] = rope_constants(
                source, node, positions, int(w.attr("rope_rot", w.attr("rope_d"))),
                w.attr("rope_tables"))
        if has_qk_norm(w.attr("epilogue")):
            d, qh = int(w.attr("rope_d")), int(w.attr("qk_heads"))
            heads = (qh, int(w.attr("rope_heads")) - qh) if w.attr("qk_per_head") else (1, 1)
            for name, h in zip(("q_norm_w", "k_norm_w"), heads, strict=True):
                out[name] = norm_weight(source, node, name, h * d).reshape(-1)
        if self.writes_norm(w):
            out["out_norm_w"] = norm_weight(source, node, "out_norm_w", w.dims["n"])
        if has_stage(w.attr("epilogue"), "layernorm_cat"):
            out["out_norm_b"] = norm_bias(source, node, "out_norm_b", w.dims["n"])
        if has_stage(w.attr("epilogue"), "rmsnorm"):
            out["post_norm_w"] = norm_weight(source, node, "post_norm_w", w.dims["n"])
        return out

    def reference(self, node, ops, tensors, env) -> Arr:
        w, x = node.workload, ops["x"]
        eps = float(w.attr("eps", DEFAULT_EPS))
        if w.attr("prologue") == "rmsnorm":
            x = rms_norm(x, tensors["norm_w"], eps)
        elif w.attr("prologue") == "layernorm":
            x = layer_norm(x, tensors["norm_w"], tensors["norm_b"], eps)
        z = x @ np.asarray(tensors["W"], np.float64).T
        if w.attr("bias", 0):
            z = z + tensors["b"]
        epi = w.attr("epilogue")
        if has_stage(epi, "rmsnorm"):
            z = rms_norm(z, tensors["post_norm_w"], float(w.attr("post_eps", DEFAULT_EPS)))
        if epi in RESIDUAL_EPILOGUES:
            z = z + ops["r"]
        if self.writes_norm(w):
            eps = float(w.attr("out_eps", DEFAULT_EPS))
            norm = layer_norm(z, tensors["out_norm_w"], tensors["out_norm_b"], eps) \
                if has_stage(epi, "layernorm_cat") else rms_norm(z, tensors["out_norm_w"], eps)
            z = np.concatenate([z, norm], axis=1)
        elif gated(epi) or epi in ACTIVATIONS:
            z = activate(epi, z)
        if has_stage(epi, "softcap"):
            z = soft_cap(z, float(w.attr("cap")))
        if has_stage(epi, "argmax_cat"):
            z = np.concatenate([z, np.argmax(z, axis=-1).astype(np.float64)[:, None]], axis=1)
        elif has_stage(epi, "rope"):
            heads, d = int(w.attr("rope_heads")), int(w.attr("rope_d"))
            m = z.shape[0]
            head = z[:, :heads * d].reshape(m, heads, d)
            if has_qk_norm(epi):
                qh, eps = int(w.attr("qk_heads")), float(w.attr("qk_eps", 1e-6))
                wq, wk = tensors["q_norm_w"], tensors["k_norm_w"]
                if w.attr("qk_per_head"):  # a scale row per head
                    wq, wk = wq.reshape(qh, d), wk.reshape(heads - qh, d)
                def norm(x: Arr, s: Arr) -> Arr:  # qklnorm: LayerNorms without shift
                    return layer_norm(x, s, 0.0, eps) if has_stage(epi, "qklnorm") \
                        else rms_norm(x, s, eps)
                head = np.concatenate([norm(head[:, :qh], wq), norm(head[:, qh:], wk)],
                                      axis=1)
            head = rope_reference(head, env, int(w.attr("rope_rot", d)),
                                  str(w.attr("rope_pairs", "half")))
            z = np.concatenate([head.reshape(m, -1), z[:, heads * d:]], axis=1)
        return z
