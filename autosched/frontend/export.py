"""``torch.export`` of one generation step of a ``transformers`` causal LM.

The step is the model with a ``transformers`` static KV cache of ``capacity`` positions,
``past`` of them already filled: ``forward(ids, positions)`` writes the new tokens' keys
and values at ``positions``, computes the logits of each sequence's last token and
returns their argmax. Exported on the meta device, nothing is allocated. Rotary tables
are position-only values the program receives per step (``weights.rope_tables`` asks the
model's own rotary module at run time), so a dynamic RoPE's data-dependent frequency
update is left out of the export.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import torch

from .aten import AtenGraph, Placeholder
from .config import ModelError
from .readers import summary_fields

__all__ = ["ExportedStep", "export_step"]

_PREFIX = "lm."


class _Step(torch.nn.Module):
    def __init__(self, lm: torch.nn.Module, batch: int, capacity: int, past: int) -> None:
        super().__init__()
        from transformers import StaticCache

        self.lm = lm
        c = lm.config
        self.cache = StaticCache(config=c, max_cache_len=capacity)
        f = summary_fields(c)  # key/value heads and head dim under any config's names
        self.cache.early_initialization(batch, f["kv_heads"], f["head_dim"], lm.dtype,
                                        lm.device)
        for layer in self.cache.layers:
            if hasattr(layer, "cumulative_length_int"):
                layer.cumulative_length_int = past

    def forward(self, ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        for layer in self.cache.layers:
            layer.cumulative_length.copy_(positions[0])
        out = self.lm(input_ids=ids, cache=self.cache, use_cache=True,
                      position_ids=positions.expand(ids.shape[0], -1), logits_to_keep=1)
        return out.logits.argmax(dim=-1)


@dataclass
class ExportedStep:
    """The exported step's graph, what each of its inputs is, and the rotary modules."""

    graph: AtenGraph
    modules: dict[str, str]  # module path -> class name, of every module called


def _module_paths(graph: torch.fx.Graph) -> dict[str, str]:
    out: dict[str, str] = {}
    for n in graph.nodes:
        for path, cls in (n.meta.get("nn_module_stack") or {}).values():
            name = getattr(cls, "__name__", str(cls)).rsplit(".", 1)[-1]
            out[path.removeprefix(_PREFIX)] = name
    return out


def _one(i: object) -> bool:
    return isinstance(i, list) and len(i) == 1 and isinstance(i[0], int) and \
        not isinstance(i[0], bool)


class _ListIndexAsSlice(torch.overrides.TorchFunctionMode):
    """``x[..., [i], :]`` traced as the equal slice ``x[..., i:i+1, :]``: on the meta
    device the index list's values would be lost (Falcon picks its key and value heads
    so)."""

    def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        if func is torch.Tensor.__getitem__ and isinstance(args[1], tuple) and \
                any(_one(i) for i in args[1]):
            args = (args[0], tuple(slice(i[0], i[0] + 1 or None) if _one(i) else i
                                   for i in args[1]))
        return func(*args, **(kwargs or {}))


def export_step(lm: torch.nn.Module, *, batch: int, tokens: int, capacity: int) -> ExportedStep:
    """Export the step of ``lm`` (on meta) writing ``tokens`` new tokens per sequence into a
    cache of ``capacity`` positions, the last of them the step's last token."""
    past = capacity - tokens
    for mod in lm.modules():  # tables are host constants computed per step at run time;
        if "dynamic" in str(getattr(mod, "rope_type", "")):  # their data-dependent
            mod.rope_type = "default"  # frequency update is not part of the program
    step = _Step(lm, batch, capacity, past)
    ids = torch.zeros((batch, tokens), dtype=torch.long, device="meta")
    positions = torch.arange(past, capacity, device="meta")
    try:
        with torch.no_grad(), warnings.catch_warnings(), _ListIndexAsSlice():
            warnings.simplefilter("ignore")  # transformers' rotary modules set attributes
            ep = torch.export.export(step, (ids, positions), strict=False)
    except (RuntimeError, TypeError, ValueError, AssertionError) as e:
        raise ModelError(f"torch.export of {type(lm).__name__} failed: "
                         f"{str(e).strip().splitlines()[0][:300]}") from e
    inputs: dict[str, Placeholder] = {}
    kinds = {"PARAMETER": "param", "BUFFER": "buffer"}
    user = iter(("ids", "positions"))
    for spec in ep.graph_signature.input_specs:
        kind = spec.kind.name
        if kind == "USER_INPUT":
            inputs[spec.arg.name] = Placeholder(next(user))
        else:
            target = (spec.target or "").removeprefix(_PREFIX)
            inputs[spec.arg.name] = Placeholder(kinds.get(kind, "const"), target)
    return ExportedStep(AtenGraph(ep.graph, inputs), _module_paths(ep.graph))
