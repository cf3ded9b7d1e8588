"""Record a routing distribution from a model run: how often each layer's router chose
each expert over a sequence of tokens, as the file ``routing.load`` reads
(``{"experts": e, "probs": [[...] per sparse layer]}``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from sim.writes import write_atomic

__all__ = ["record_routing"]


def _routers(model: Any) -> list[Any]:
    """The routers of a ``transformers`` mixture of experts: a sparse block's ``gate``
    that returns (logits, weights, indices)."""
    return [mod for name, mod in model.named_modules()
            if name.endswith(".gate") and hasattr(mod, "top_k") and hasattr(mod, "weight")]


def record_routing(model: Any, tokens: list[int], path: str | Path, *, seed: int = 0) -> dict:
    """Run ``model`` (anything ``load_source`` reads: a checkpoint folder, config,
    ``transformers`` module) over ``tokens`` and write each sparse layer's expert
    frequencies to ``path``; returns what was written."""
    import torch

    from autosched.frontend.source import load_source

    ref = load_source(model, seed=seed).reference
    routers = _routers(ref)
    if not routers:
        raise ValueError("the model has no mixture-of-experts router")
    e = int(routers[0].weight.shape[0])
    counts = np.zeros((len(routers), e))

    def hook(i: int):
        def fn(_mod, _inp, out) -> None:
            idx = out[-1].reshape(-1).numpy()
            np.add.at(counts[i], idx, 1)
        return fn

    handles = [r.register_forward_hook(hook(i)) for i, r in enumerate(routers)]
    try:
        with torch.no_grad():
            ref(input_ids=torch.tensor([tokens]))
    finally:
        for h in handles:
            h.remove()
    probs = counts / counts.sum(axis=1, keepdims=True)
    data = {"experts": e, "tokens": len(tokens), "probs": probs.tolist()}
    write_atomic(path, json.dumps(data), what="routing file")
    return data
