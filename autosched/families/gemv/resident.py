"""Resident weight layouts: every step of a model reads each weight where it already is.

A weight's layout is decided once, by the schedule its GEMV has at one activation row
(batch-1 decode: the database's best there, else the default), and every other step that
multiplies by it (decode at a larger batch, prefill) has its workload pinned to that
layout (the GEMV space's ``layout`` attribute): PIM schedules keep the layout, the host
reads it. ``tune`` and ``compile`` both pin every node through its family
(``GemvFamily.pin``), so the schedules tuned for a batch are the ones compiled for it.
"""

from __future__ import annotations

from typing import Any

from search_spaces import Workload
from search_spaces.gemv import default_layout, point_opts
from sim.hardware import Hardware
from sim.kernels.gemv_layout import layout_key

__all__ = ["pin_layout"]


def _with_attrs(w: Workload, **attrs: object) -> Workload:
    return Workload(w.op, w.shape, w.dtype, tuple(sorted({**dict(w.attrs), **attrs}.items())))


def pin_layout(w: Workload, hw: Hardware, db: Any, dev: Hardware | None = None) -> Workload:
    """``w`` (gemv or gemm over more than one row) with its weights' resident layout as
    its ``layout`` attribute; any other workload unchanged. ``dev``: the device the
    layout is resolved on (the weight format's view, ``formats.format_device``)."""
    from autosched.lookup import lookup  # the lookup reads every family: imported on use

    if w.dims["m"] == 1 or w.attr("layout") is not None:
        return w
    n, k = w.dims["n"], w.dims["k"]
    one = Workload.make("gemv", w.dtype, dict(w.attrs), m=1, n=n, k=k)
    point = lookup(db, one, hw).schedule.point
    dev = dev or hw
    if point.get("placement") == "pim":
        layout = point_opts(point).resolve(dev, n, k, 1)
    else:
        layout = default_layout(dev, n, k)
    return w if layout is None else _with_attrs(w, layout=layout_key(layout))
