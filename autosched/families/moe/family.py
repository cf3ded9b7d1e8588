"""The ``moe`` family: a routed mixture of experts as one operator whose program
dispatches the experts the router chose (see :mod:`.kernel`)."""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np

from search_spaces import Schedule, Space, Workload
from search_spaces.moe import moe_default, moe_space
from sim.errors import AutoschedError
from sim.hardware import Hardware
from sim.kernels import Kernel

from ..base import Family, Option
from ..gemv.bound import gemv_bound
from . import routing
from .kernel import _groups, moe_kernel, replicated
from .replicas import slot_rows

__all__ = ["MoeFamily", "active_path", "device_path"]

Arr = np.ndarray


def _probs(w: Workload) -> Arr:
    return routing.decode(str(w.attr("route", "uniform")), w.dims["e"])


def active_path(w: Workload) -> Arr:
    """Rows each expert receives on the path the compiler expects (``[e]``); with the
    experts split over ``ep`` devices, this device's are the first ``e / ep``."""
    d = w.dims
    return routing.expected_rows(d["m"], d["k"], _probs(w), int(w.attr("ep", 1)))


def device_path(w: Workload, point: dict) -> Arr:
    """Rows each device's expert slots receive on the expected path (``[ep, slots]``):
    its own experts, then the replicas ``point`` asks for (:func:`.replicas.slot_rows`)."""
    return slot_rows(active_path(w), replicated(w, point), int(w.attr("ep", 1)))


def busiest(w: Workload, point: dict) -> Arr:
    """Expected trips of the slots of the device the step waits for: the one whose
    busiest channel group has the most trips (then the most trips in all)."""
    tile = min(int(point["tile"]), w.dims["m"])
    per = np.ceil(device_path(w, point) / tile).astype(int)
    groups = _groups(point)
    score = [(max(int(p[g::groups].sum()) for g in range(groups)), int(p.sum())) for p in per]
    return per[max(range(len(per)), key=lambda d: (score[d], -d))]


def _gemv(m: int, n: int, k: int, dtype: str) -> Workload:
    return Workload.make("gemv", dtype, None, m=m, n=n, k=k)


class MoeFamily(Family):
    """moe: router, routing on the host, dispatched experts, weighted sum."""

    ops: ClassVar[tuple[str, ...]] = ("moe",)
    in_banks: ClassVar[bool] = True
    memory_kind: ClassVar[str | None] = "replicas"  # the first to go when a stage overflows

    def space(self, workload: Workload, hw: Hardware) -> Space:
        return moe_space(workload, hw)

    def default(self, workload: Workload, hw: Hardware) -> dict:
        return moe_default(workload, hw)

    def adapt(self, workload: Workload, *, window: int, capacity: int,
              route: tuple[float, ...] = ()) -> Workload:
        """The layer's measured routing as the ``route`` attribute (none: uniform)."""
        if not route:
            return workload
        e = workload.dims["e"]
        if len(route) != e:
            raise AutoschedError(f"{workload.key}: a routing of {len(route)} experts for a "
                                 f"layer of {e}")
        from autosched.pipeline import with_attrs

        return with_attrs(workload, route=routing.encode(route))

    def lower(self, workload: Workload, point: dict, hw: Hardware) -> Kernel:
        """The kernel timed on the path of the device with the most trips: the others'
        outputs wait for it in the all-reduce."""
        return moe_kernel(workload, point, hw, [int(t) for t in busiest(workload, point)])

    def shard(self, workload: Workload, dims: tuple[str, ...], tp: int) -> Workload:
        """Expert parallelism: each of ``tp`` devices keeps ``e / tp`` experts (and
        computes the routing whole); the dims stay those of the model."""
        from autosched.pipeline import with_attrs

        return with_attrs(workload, ep=tp)

    def bound(self, workload: Workload, hw: Hardware) -> float:
        """The head GEMV, the shared expert, and one read of the weights of each active
        expert (one the expected path routes rows to) a device must run at the least
        (the active experts spread evenly over the ``ep`` devices), each at its own
        bound."""
        d, dt = workload.dims, workload.dtype
        m, n, i, e, s = d["m"], d["n"], d["i"], d["e"], d["s"]
        shared = bool(workload.attr("shared", 0))
        head = gemv_bound(_gemv(m, e + (1 + 2 * s if shared else 0), n, dt), hw)
        sdown = gemv_bound(_gemv(m, n, s, dt), hw) if shared else 0.0
        active = math.ceil(int((active_path(workload) > 0).sum()) / int(workload.attr("ep", 1)))
        one = gemv_bound(_gemv(1, 2 * i, n, dt), hw) + gemv_bound(_gemv(1, n, i, dt), hw)
        return head + sdown + active * one

    def fit_memory(self, step: Any) -> dict[str, Schedule]:
        """Every looked-up moe schedule of ``step`` that copies experts, without the
        copies (each device keeps only its own experts)."""
        out: dict[str, Schedule] = {}
        for name, c in step.choices.items():
            point = c.schedule.point
            if c.workload.op == "moe" and point.get("replicas") and not c.kind.fixed:
                space = self.space(c.workload, step.hw)
                out[name] = Schedule.of(space, {**point, "replicas": 0})
        return out

    def options(self, workload: Workload, hw: Hardware) -> tuple[Option, ...]:
        b = self.bound(workload, hw)
        return (Option(b, 0.0, b),)

    def weight_bytes(self, workload: Workload, hw: Hardware, point: dict | None = None) -> int:
        """This device's experts (and the replicas ``point`` adds), the router and the
        shared expert."""
        d = workload.dims
        n, i, e, s = d["n"], d["i"], d["e"], d["s"]
        shared = bool(workload.attr("shared", 0))
        local = e // int(workload.attr("ep", 1)) + len(replicated(workload, point or {}))
        elems = local * 3 * i * n + n * e + (n * (1 + 3 * s) if shared else 0)
        return 2 * elems

    def recognisers(self) -> tuple:
        from .pattern import moe

        return ((15, moe),)

    def tensors(self, workload: Workload) -> tuple[str, ...]:
        shared = bool(workload.attr("shared", 0))
        return ("head", "gate_up", "down", *(("sdown",) if shared else ()))

    def weights(self, source: Any, node: Any) -> dict[str, Arr]:
        get = source.get
        head = [get(node.param("router"))]
        out = {"gate_up": get(node.param("gate_up")), "down": get(node.param("down"))}
        if node.workload.attr("shared", 0):
            head += [get(node.param(p)) for p in ("s_router", "s_gate", "s_up")]
            out["sdown"] = get(node.param("s_down"))
        out["head"] = np.concatenate(head, axis=0)
        return out

    def reference(self, node: Any, ops: dict[str, Arr], tensors: dict[str, Arr],
                  env: Any) -> Arr:
        w = node.workload
        d = w.dims
        e, k, s = d["e"], d["k"], d["s"]
        x = np.asarray(ops["x"], np.float64)
        h = x @ np.asarray(tensors["head"], np.float64).T
        wts = routing.route(h, e, k, bool(w.attr("norm", 0)))
        out = np.zeros((x.shape[0], d["n"]))
        local = e // int(w.attr("ep", 1))  # tensors: this device's experts (the first)
        for j in range(local):
            gu = x @ tensors["gate_up"][j].astype(np.float64).T
            a = gu[:, :d["i"]]
            y = (a / (1 + np.exp(-a)) * gu[:, d["i"]:]) @ tensors["down"][j].astype(
                np.float64).T
            out += wts[:, j:j + 1] * y
        if w.attr("shared", 0):
            g, u = h[:, e + 1:e + 1 + s], h[:, e + 1 + s:e + 1 + 2 * s]
            ys = (g / (1 + np.exp(-g)) * u) @ tensors["sdown"].astype(np.float64).T
            out += 1 / (1 + np.exp(-h[:, e:e + 1])) * ys / int(w.attr("ep", 1))
        return out
