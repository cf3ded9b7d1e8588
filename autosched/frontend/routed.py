"""A routing distribution in (``--routing FILE``): how often each sparse layer's router
picks each expert, measured from prompts, read into the model config so that ``tune``,
``compile`` and ``simulate`` see the same expected path (uniform when none is given).

The file is what ``autosched run --record-routing`` writes::

    {"experts": 8, "layers": [0, 1], "probs": [[...8...], [...8...]], "tokens": 64}

``probs`` is one list of ``experts`` probabilities (every layer), or one per layer
listed in ``layers``; without ``layers`` the lists are the model's layers in order. Each
list sums to one (within 1e-3; renormalised); every other shape is refused naming it.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

from sim.files import load_json

from .config import ModelConfig, ModelError

__all__ = ["ROUTING_LIMIT", "read_routing", "with_routing"]

# a routing file holds a few probabilities per layer: 4 MB is far beyond any model
ROUTING_LIMIT = 4 << 20


def _row(path: str | Path, at: str, row: object, e: int) -> tuple[float, ...]:
    if not isinstance(row, list) or len(row) != e or not all(
            isinstance(p, (int, float)) and not isinstance(p, bool) and p >= 0 for p in row):
        raise ModelError(f"routing file {path}: {at} must be a list of {e} non-negative "
                         "probabilities")
    total = float(sum(row))
    if not math.isclose(total, 1.0, rel_tol=1e-3):
        raise ModelError(f"routing file {path}: {at} sums to {total:.4g}, not 1")
    return tuple(float(p) / total for p in row)


def read_routing(path: str | Path, layers: int) -> tuple[int, tuple[tuple[float, ...], ...]]:
    """(experts, rows) of a routing file for a model of ``layers`` layers: one row for
    every layer, or ``layers`` rows (``()`` for a layer the file does not list)."""
    d = load_json(path, limit=ROUTING_LIMIT, what="routing file", error=ModelError)
    if not isinstance(d, dict) or "probs" not in d:
        raise ModelError(f"routing file {path}: want an object with 'experts' and 'probs'")
    e = d.get("experts")
    if isinstance(e, bool) or not isinstance(e, int) or e < 1:
        raise ModelError(f"routing file {path}: 'experts' must be a positive integer")
    probs = d["probs"]
    if isinstance(probs, list) and probs and not isinstance(probs[0], list):
        return e, (_row(path, "probs", probs, e),)
    if not isinstance(probs, list) or not probs:
        raise ModelError(f"routing file {path}: 'probs' must be a list of probabilities or "
                         "one list per layer")
    where = d.get("layers", list(range(len(probs))) if len(probs) == layers else None)
    if where is None:
        raise ModelError(f"routing file {path}: {len(probs)} lists of probabilities for a "
                         f"model of {layers} layers; say which with 'layers'")
    if not isinstance(where, list) or len(where) != len(probs) or not all(
            isinstance(i, int) and not isinstance(i, bool) and 0 <= i < layers
            for i in where) or len(set(where)) != len(where):
        raise ModelError(f"routing file {path}: 'layers' must list {len(probs)} distinct "
                         f"layers among 0..{layers - 1}")
    rows: list[tuple[float, ...]] = [()] * layers
    for i, row in zip(where, probs, strict=True):
        rows[i] = _row(path, f"layer {i}'s probabilities", row, e)
    return e, tuple(rows)


def with_routing(cfg: ModelConfig, path: str | Path) -> ModelConfig:
    """``cfg`` routing its experts as the file at ``path`` measured (``--routing``)."""
    if not cfg.experts:
        raise ModelError(f"--routing {path}: {cfg.name} has no routed experts")
    e, rows = read_routing(path, cfg.layers)
    if e != cfg.experts:
        raise ModelError(f"routing file {path}: {e} experts, but {cfg.name} routes over "
                         f"{cfg.experts}")
    return dataclasses.replace(cfg, routing=rows)
