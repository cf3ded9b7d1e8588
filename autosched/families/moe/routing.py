"""Routing: the host's arithmetic between the router GEMV and the experts, and the path
the compiler expects the data to take.

``route`` turns router logits into per-row expert weights (zero for experts not chosen),
held expert-major (``[e, m]``: a device's own experts are one contiguous block):
softmax over every expert, the top ``k``, renormalised to sum to one when the config
asks (Mixtral always; Qwen3-MoE, OLMoE and Qwen2-MoE by ``norm_topk_prob``). ``trips``
counts each expert's dispatched trips of ``tile`` rows; the host's ``select`` op writes
both in one dispatch (the weights, then the trips). ``gather`` packs each expert's rows
into its slot of ``[e, slot, n]`` in row order, ``combine`` sums the experts' outputs
back per row (with hot experts replicated over devices, per device slot:
:mod:`.replicas`). These are registered as host ``extern``
ops under names carrying their parameters, so the functional simulator runs exactly
this arithmetic.

A routing *distribution* (``uniform``, or a layer's probabilities measured from prompts:
``--routing FILE``, read by :mod:`autosched.frontend.routed`, carried by the workload's
``route`` attribute as ``encode`` writes it) gives the expected path: how many rows each
expert receives at a batch, which the timing simulator times and the bound counts.
"""

from __future__ import annotations

import math

import numpy as np

from sim.errors import AutoschedError
from sim.host_ops import register_extern

from .replicas import device_slots

__all__ = ["combine", "decode", "encode", "expected_rows", "gather", "register", "route",
           "spread", "trips"]

Arr = np.ndarray


def route(logits: Arr, e: int, k: int, norm: bool) -> Arr:
    """``[m, e]`` weights of each row's top-``k`` experts (zero elsewhere)."""
    x = np.asarray(logits, np.float64)[:, :e]
    p = np.exp(x - x.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    top = np.argsort(-p, axis=1, kind="stable")[:, :k]
    w = np.take_along_axis(p, top, axis=1)
    if norm:
        w = w / w.sum(axis=1, keepdims=True)
    out = np.zeros_like(p)
    np.put_along_axis(out, top, w, axis=1)
    return out


def _rows(weights: Arr) -> list[Arr]:
    return [np.nonzero(weights[j])[0] for j in range(weights.shape[0])]


def gather(x: Arr, weights: Arr, slot: int) -> Arr:
    """``[e * slot, width]``: expert ``j``'s rows of ``x`` packed from row ``j * slot``
    (``weights``: ``[e, m]``)."""
    e, width = weights.shape[0], x.shape[1]
    out = np.zeros((e * slot, width), np.float32)
    for j, rows in enumerate(_rows(weights)):
        out[j * slot:j * slot + len(rows)] = x[rows]
    return out


def trips(weights: Arr, tile: int) -> Arr:
    """``[e]`` dispatched trips of ``tile`` rows per expert (``weights``: ``[e, m]``)."""
    counts = (weights != 0).sum(axis=1)
    return np.ceil(counts / tile).astype(np.float32)


def combine(ys: Arr, weights: Arr, slot: int, n: int) -> Arr:
    """``[m, n]``: each row's experts' outputs (``ys`` packed as ``gather`` packs) weighted."""
    m = weights.shape[1]
    out = np.zeros((m, n), np.float64)
    for j, rows in enumerate(_rows(weights)):
        out[rows] += weights[j, rows, None] * ys[j * slot:j * slot + len(rows), :n]
    return out


def _sigmoid(x: Arr) -> Arr:
    return 1.0 / (1.0 + np.exp(-x))


def _silu(x: Arr) -> Arr:
    return x * _sigmoid(x)


def _fit(x: Arr, width: int) -> Arr:
    """``x`` with its rows cut or zero-padded to ``width`` columns (float32)."""
    out = np.zeros((x.shape[0], width), np.float32)
    w = min(width, x.shape[1])
    out[:, :w] = x[:, :w]
    return out


def register(e: int, k: int, norm: bool, slot: int, tile: int, n: int, s: int,
             xw: int, hw: int, sw: int, ep: int = 1,
             hot_experts: tuple[int, ...] = ()) -> dict[str, str]:
    """Register the host externs of one moe shape (``xw``, ``hw``, ``sw``: the padded
    widths of the gathered rows, the activation and the shared activation; ``ep``
    devices sharing the experts, each adding ``1/ep`` of the shared expert so that their
    sum holds it once; ``hot_experts`` replicated on every device, see
    :func:`device_slots`); their names by role."""
    tag = f"{e}.{k}.{int(norm)}.{slot}.{tile}.{n}.{s}.{xw}.{hw}.{sw}.{ep}"
    if hot_experts:
        tag += ".r" + "-".join(map(str, hot_experts))
    names = {r: f"moe_{r}.{tag}" for r in ("select", "gather", "act", "shared", "combine")}

    def select(h: Arr) -> Arr:  # every device's slot weights, then every slot's trips
        w = route(h, e, k, norm).T.astype(np.float32)
        if hot_experts:
            w = device_slots(w, hot_experts, ep).reshape(-1, w.shape[1])
        return np.concatenate([w.reshape(-1), trips(w, tile)])

    register_extern(names["select"], select)
    register_extern(names["gather"], lambda x, w: gather(_fit(x, xw), w, slot))

    def act(h: Arr) -> Arr:  # silu(gate) * up, padded to the down projection's rows
        i = h.shape[1] // 2
        return _fit(_silu(h[:, :i].astype(np.float64)) * h[:, i:], hw)

    register_extern(names["act"], act)

    def shared(h: Arr) -> Arr:  # the shared expert's silu(gate) * up from the head GEMV
        g, u = h[:, e + 1:e + 1 + s], h[:, e + 1 + s:e + 1 + 2 * s]
        return _fit(_silu(g.astype(np.float64)) * u, sw)

    register_extern(names["shared"], shared)

    def comb(ys: Arr, w: Arr, *rest: Arr) -> Arr:
        out = combine(ys, w, slot, n)
        if rest:  # + sigmoid(shared gate) * shared expert
            h, y_s = rest
            out += _sigmoid(h[:, e:e + 1].astype(np.float64)) * y_s[:, :n] / ep
        return out.astype(np.float32)

    register_extern(names["combine"], comb)
    return names


def spread(e: int, ep: int) -> Arr:
    """Expert order that alternates between the ``ep`` devices' blocks of experts, then
    between neighbours within a block (channel groups take ``j % groups``)."""
    local = e // ep
    return np.array([d * local + t for t in range(local) for d in range(ep)])


def expected_rows(m: int, k: int, probs: Arr, ep: int = 1) -> Arr:
    """Rows each expert receives when ``m`` rows choose ``k`` experts each from the
    distribution ``probs`` (``[e]``, summing to 1): ``m * k * p`` rounded by largest
    remainder (ties go round the ``ep`` devices, as random routing spreads them), no
    expert above ``m``; a fixed path the timing simulator times."""
    e = len(probs)
    want = m * k * np.asarray(probs, np.float64)
    rows = np.minimum(np.floor(want), m).astype(int)
    rest = m * k - int(rows.sum())
    order = spread(e, ep)
    rank = np.empty(e, int)
    rank[order] = np.arange(e)
    while rest > 0 and (rows < m).any():  # passes of one row each, largest remainder first
        for j in np.lexsort((rank, -(want - rows))):
            if rest <= 0:
                break
            if rows[j] < m:
                rows[j] += 1
                rest -= 1
    return rows[:e]


def encode(probs: tuple[float, ...] | Arr) -> str:
    """A layer's expert probabilities as the workload attribute ``route`` holds them
    (``/``-separated, 4 significant digits: what ``expected_rows`` can tell apart)."""
    return "/".join(f"{float(p):.4g}" for p in probs)


def decode(text: str, e: int) -> Arr:
    """``[e]`` probabilities of a ``route`` attribute (``uniform``: ``1/e`` each)."""
    if text == "uniform":
        return np.full(e, 1.0 / e)
    try:
        probs = np.array([float(p) for p in text.split("/")], np.float64)
    except ValueError:
        raise AutoschedError(f"route {text[:40]!r}: not '/'-separated probabilities") from None
    if probs.shape != (e,) or not np.all(probs >= 0) or not math.isclose(probs.sum(), 1.0,
                                                                            rel_tol=1e-2):
        raise AutoschedError(f"route of {len(probs)} probabilities: want {e} summing to 1")
    return probs / probs.sum()
