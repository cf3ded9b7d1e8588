"""Record a routing distribution from a model run: how often each layer's router chose
each expert over a sequence of tokens, as the file ``--routing`` reads
(:mod:`autosched.frontend.routed`: ``{"experts": e, "layers": [...], "probs": [[...] per
sparse layer]}``)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np

from autosched.ir.errors import ModelError
from sim.writes import write_atomic

__all__ = ["record_routing"]


def _routers(model: Any) -> list[tuple[int, Any]]:
    """(layer, router) of a ``transformers`` mixture of experts: a sparse block's ``gate``
    that returns (logits, weights, indices), in a module path ``...layers.<i>...``."""
    out = []
    for name, mod in model.named_modules():
        at = re.search(r"\.layers\.(\d+)\.", name)
        if at and name.endswith(".gate") and hasattr(mod, "top_k") and hasattr(mod, "weight"):
            out.append((int(at.group(1)), mod))
    return out


def record_routing(model: Any, tokens: list[int], path: str | Path, *, seed: int = 0) -> dict:
    """Run ``model`` (anything ``load_source`` reads: a checkpoint folder, config,
    ``transformers`` module) over ``tokens`` and write each sparse layer's expert
    frequencies to ``path``; returns what was written."""
    import torch

    from autosched.frontend.source import load_source

    ref = load_source(model, seed=seed).reference
    routers = _routers(ref)
    if not routers:
        raise ModelError("the model has no mixture-of-experts router to record")
    e = int(routers[0][1].weight.shape[0])
    counts = np.zeros((len(routers), e))

    def hook(i: int):
        def fn(_mod, _inp, out) -> None:
            idx = out[-1].reshape(-1).numpy()
            np.add.at(counts[i], idx, 1)
        return fn

    handles = [r.register_forward_hook(hook(i)) for i, (_, r) in enumerate(routers)]
    try:
        with torch.no_grad():
            ref(input_ids=torch.tensor([tokens]))
    finally:
        for h in handles:
            h.remove()
    probs = counts / counts.sum(axis=1, keepdims=True)
    data = {"experts": e, "tokens": len(tokens), "layers": [i for i, _ in routers],
            "probs": probs.tolist()}
    write_atomic(path, json.dumps(data), what="routing file")
    return data
