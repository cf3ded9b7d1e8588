"""The ``attention`` family: attention over a KV cache that lives in the banks.

Beside its kernel (:mod:`.lowering`) it answers for the cache: its bytes and rows per
bank at any batch, the denser layouts a step takes when its memory plan overflows
(:mod:`.fit`), the capacity and sliding window a step gives the workload, and the
attention of the float64 reference evaluator.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, ClassVar

import numpy as np

from autosched.ir.errors import FusionError
from search_spaces import Schedule, Space, Workload
from search_spaces.attention import attention_default, attention_space, cache_rows
from search_spaces.attention.geometry import attention_shape
from search_spaces.attention.space import capacity_of
from sim.errors import AutoschedError
from sim.hardware import Hardware
from sim.kernels import Kernel
from sim.timing import simulate

from ..base import Family, Option
from .bound import attention_bound, attention_bound_terms
from .fit import compact_schedules
from .lowering import attention_kernel

__all__ = ["AttentionFamily"]

Arr = np.ndarray


def _with(w: Workload, dims: dict | None = None, **attrs: object) -> Workload:
    return Workload.make(w.op, w.dtype, {**dict(w.attrs), **attrs}, **{**w.dims, **(dims or {})})


@lru_cache(maxsize=512)
def _timed_default(workload: Workload, hw: Hardware) -> dict:
    """The space's default (:func:`attention_default`) with the score registers per query
    row (its count and every smaller one) and the softmax stages that simulate fastest
    together (do not change the returned dict). Fewer registers read a unit's scores
    out in more, smaller parts, all but the last behind the next positions' MACs, and
    stages hide the host's softmax behind the banks' products but add a merge and
    stop each product at the stage boundaries: what pays moves the tails, which the
    arithmetic does not see (Llama 2's 32 heads of 1,024 positions on aim-gddr6: 3,042
    ns with the rule's four registers and one stage, 2,981 ns with two registers, 2,725
    ns with one register and two stages)."""
    point = attention_default(workload, hw)
    if point.get("scores") != "pim":
        return point
    space = attention_space(workload, hw)
    regs = [point["k_regs"], *(r for r in space.param("k_regs").domain.values()
                               if r < point["k_regs"])]
    stages = space.param("softmax_stages").domain.values() if point.get("wsum") == "pim" \
        else ()
    cands = [{**point, "k_regs": r, **({"softmax_stages": n} if stages else {})}
             for n in (stages or (None,)) for r in regs]
    cands = [p for p in cands if not space.validate(p)]
    ns = [simulate(attention_kernel(workload, p, hw).program, hw).latency_ns for p in cands]
    return cands[min(range(len(cands)), key=lambda i: (ns[i], i))]


class AttentionFamily(Family):
    """Attention over the KV cache; no weights, the cache rows are ``Kernel.rows``."""

    ops: ClassVar[tuple[str, ...]] = ("attention",)
    engine_params: ClassVar[tuple[str, ...]] = ("scores", "wsum")
    in_banks: ClassVar[bool] = True
    memory_kind: ClassVar[str | None] = "cache"

    def space(self, workload: Workload, hw: Hardware) -> Space:
        return attention_space(workload, hw)

    def default(self, workload: Workload, hw: Hardware) -> dict:
        return dict(_timed_default(workload, hw))

    def lower(self, workload: Workload, point: dict, hw: Hardware) -> Kernel:
        return attention_kernel(workload, point, hw)

    def bound(self, workload: Workload, hw: Hardware) -> float:
        return attention_bound(workload, hw)

    def recognisers(self) -> tuple:
        from .pattern import attention

        return ((10, attention),)

    def absorbs(self, g: Any, node: Any, matches: list) -> bool:
        from .pattern import absorb_write

        return absorb_write(g, node, matches)

    def options(self, workload: Workload, hw: Hardware) -> tuple[Option, ...]:
        # the banks (each product where it is faster: a product streamed to the host adds
        # its bus time, and nothing to the chain, as in the host option), or the host
        t = attention_bound_terms(workload, hw)
        soft, bus = t["softmax"], t["bus"]
        k, v = t["pim_k"] + t["refresh_k"], t["pim_v"] + t["refresh_v"]
        return (Option(min(t["pim_k"], bus) + min(t["pim_v"], bus), soft,
                       (k if k < bus else 0.0) + (v if v < bus else 0.0) + soft),
                Option(2 * bus, soft, soft))

    # ---- the workload in a step ----------------------------------------------------
    def adapt(self, workload: Workload, *, window: int, capacity: int,
              route: tuple[float, ...] = ()) -> Workload:
        extra = {"window": window} if 0 < window < capacity else {}
        return _with(workload, capacity=capacity, **extra)

    def with_context(self, workload: Workload, context: int) -> Workload:
        return _with(workload, {"l": context})

    # ---- memory --------------------------------------------------------------------
    def cache_bytes(self, workload: Workload, hw: Hardware) -> int:
        d = workload.dims
        cap = int(workload.attr("capacity", d["l"]))
        return 2 * d["b"] * cap * d["kvh"] * d["d"] * hw.elem_bytes

    def cache_rows(self, workload: Workload, point: dict, batch: int,
                   hw: Hardware) -> int | None:
        wb = _with(workload, {"b": batch})
        try:
            if attention_space(wb, hw).validate(point):
                point = attention_default(wb, hw)
        except AutoschedError:
            return None
        return cache_rows(attention_shape(wb.dims, capacity_of(wb), hw), point)

    def fit_memory(self, step: Any) -> dict[str, Schedule]:
        return compact_schedules(step)

    # ---- graph ---------------------------------------------------------------------
    def rows(self, workload: Workload) -> int:
        return workload.dims["b"] * workload.dims["q"]

    def output_width(self, workload: Workload) -> int:
        return workload.dims["h"] * workload.dims["d"]

    def labelled_operands(self, node: Any) -> dict[str, tuple[str, ...]]:
        return {k: (k,) for k in ("q", "k", "v")}

    # ---- numbers -------------------------------------------------------------------
    def reference(self, node, ops, tensors, env) -> Arr:
        """Writes the new keys and values into ``env.caches[node.name]`` (``[b, kvh, L,
        d]``, positions ``l-q .. l-1``), then causal attention over the first ``l``."""
        d = node.workload.dims
        b, q, h, kvh, hd, length = d["b"], d["q"], d["h"], d["kvh"], d["d"], d["l"]
        caches = env.caches
        if node.name not in caches:
            caches[node.name] = (np.zeros((b, kvh, length, hd)),
                                 np.zeros((b, kvh, length, hd)))
        kc, vc = caches[node.name]
        if kc.shape[2] < length:
            raise FusionError(f"{node.name}: cache holds {kc.shape[2]} positions, needs "
                              f"{length}")
        new = slice(length - q, length)
        kc[:, :, new] = ops["k"].reshape(b, q, kvh, hd).transpose(0, 2, 1, 3)
        vc[:, :, new] = ops["v"].reshape(b, q, kvh, hd).transpose(0, 2, 1, 3)
        qs = ops["q"].reshape(b, q, h, hd).transpose(0, 2, 1, 3)  # [b, h, q, d]
        group = np.arange(h) // (h // kvh)
        k, v = kc[:, group, :length], vc[:, group, :length]  # [b, h, l, d]
        s = qs @ k.transpose(0, 1, 3, 2) / np.sqrt(hd)
        visible = np.arange(length)[None, :] <= (length - q + np.arange(q))[:, None]
        s = np.where(visible, s, -np.inf)
        p = np.exp(s - s.max(-1, keepdims=True))
        out = (p / p.sum(-1, keepdims=True)) @ v  # [b, h, q, d]
        return out.transpose(0, 2, 1, 3).reshape(b * q, h * hd)
