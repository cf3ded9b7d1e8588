"""Capture: the ``transformers`` module of a model, exported on meta tensors -> :class:`OpGraph`.

The module is the one the config describes (or the user's own class): its step with a
static KV cache is exported (:mod:`.export`), the ATen graph is matched to operators
(:mod:`.lower`, :mod:`.patterns`) and named by role (:mod:`.roles`). Deep models are
captured with two layers of each attention kind and extended (:mod:`.replicate`); a model
whose layers differ is captured whole. Prefill computes logits for the last token only,
as generation does.
"""

from __future__ import annotations

from typing import Any

import torch

from autosched.ir import OpGraph, OpNode

from .config import ModelConfig, ModelError
from .export import ExportedStep, export_step
from .lower import find_matches
from .match import Kind
from .module import build_module
from .quantized import mark_quantized
from .replicate import replicate
from .roles import to_nodes
from .zoo import get_model_config

__all__ = ["capture", "capture_nodes"]


def _rotary_path(ex: ExportedStep, node: torch.fx.Node) -> str:
    """The module that computed a rotary table (the deepest module on its stack)."""
    node = ex.graph.root(node)
    stack = list((node.meta.get("nn_module_stack") or {}).values())
    return stack[-1][0].removeprefix("lm.") if stack else ""


def _rotary_kind(ex: ExportedStep, node: torch.fx.Node) -> str:
    """The layer type a rotary table was computed for ("" for a module with one table):
    the prefix of the ``{kind}_inv_freq`` buffer it reads (Gemma 3, OLMo 3)."""
    g, todo, seen = ex.graph, [node], set()
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        ph = g.placeholder(n)
        if ph is not None and ph.kind == "buffer" and ph.target.endswith("_inv_freq"):
            kind = ph.target.rsplit(".", 1)[-1].removesuffix("_inv_freq")
            if kind not in ("", "original"):
                return kind
        todo.extend(n.all_input_nodes)
    return ""


def _token_major(ex: ExportedStep, matches: list, tokens: int, name: str) -> None:
    """Refuse a step whose rotary or attention kernel would read a value materialised
    head-major (``[b, heads, tokens, d]``, by a host op or an element-wise kernel) as
    token-major rows: the same memory only when one token is computed (decode)."""
    if tokens == 1:
        return
    made = {m.out: m for m in matches}
    for m in matches:
        if m.kind not in (Kind.ROTARY, Kind.ATTENTION):
            continue
        for x in m.ins:
            src = made.get(x)
            shape = ex.graph.shape(x)
            if src is not None and src.kind not in (Kind.LINEAR, Kind.ROTARY, Kind.NORM) \
                    and len(shape) == 4 and shape[1] > 1 and shape[2] == tokens:
                raise ModelError(
                    f"{name}: its {m.op} reads {src.op} op "
                    f"{src.attrs.get('fn', src.op)} computed per head over {tokens} "
                    "tokens; steps of one token (decode) are supported, prompts are not "
                    "yet for this model")


def _layer_list(model: torch.nn.Module, layers: int) -> str:
    """Parameter path of the decoder's layer list: the largest ModuleList of ``layers``."""
    best, size = "", -1
    for name, mod in model.named_modules():
        if isinstance(mod, torch.nn.ModuleList) and len(mod) == layers:
            n = sum(p.numel() for p in mod.parameters())
            if n > size:
                best, size = name, n
    if not best:
        raise ModelError(f"{type(model).__name__} has no list of {layers} decoder layers")
    return best


def capture_nodes(cfg: ModelConfig, *, batch: int, tokens: int, length: int,
                  whole: bool = False) -> list[OpNode]:
    """Operator nodes of one step (``tokens`` new tokens, ``length`` positions after it);
    ``whole`` captures every layer instead of two of each kind."""
    kinds = [(int(0 < cfg.window(i) < length), cfg.layer_kind(i)) for i in range(cfg.layers)]
    order = list(dict.fromkeys(kinds))
    proto_kinds = [k for k in order for _ in range(2)]
    short = not whole and len(proto_kinds) < cfg.layers
    proto = cfg
    if short:  # the first two layers of each kind, in order of the kinds
        picks = [i for k in order for i in [j for j, x in enumerate(kinds) if x == k][:2]]
        if len(picks) == len(proto_kinds):
            proto = cfg.subset(tuple(picks))
        else:
            short = False
    model = build_module(proto, device="meta")
    ex = export_step(model, batch=batch, tokens=tokens, capacity=length)
    matches = find_matches(ex.graph)
    _token_major(ex, matches, tokens, cfg.name)
    for m in matches:
        if m.kind is Kind.ROTARY:
            m.extra["rotary"] = _rotary_path(ex, m.extra["cos"])
            m.extra["rotary_kind"] = _rotary_kind(ex, m.extra["cos"])
        if m.kind is Kind.ATTENTION:
            m.dims["l"] = length
    nodes = mark_quantized(to_nodes(ex.graph, matches, cfg.dtype), cfg)
    if short:
        out = replicate(nodes, proto_kinds, kinds, _layer_list(model, proto.layers))
        if out is not None:
            return out
        return capture_nodes(cfg, batch=batch, tokens=tokens, length=length, whole=True)
    return nodes


def capture(model: ModelConfig | str | Any, *, phase: str = "decode", batch: int = 1,
            context: int | None = None, prompt: int | None = None) -> OpGraph:
    """Operator graph of one step of ``model`` (a config, built-in name, config.json or
    checkpoint path, or ``transformers`` model).

    ``decode``: ``batch`` sequences, one new token each, attending over ``context`` cached
    positions including the new one (default: ``max_positions``). ``prefill``: ``prompt``
    tokens per sequence (default: ``max_positions``) into an empty cache of that length.
    Everything lives on the meta device: no weight memory is allocated.
    """
    cfg = get_model_config(model)
    if phase not in ("decode", "prefill"):
        raise ModelError(f"phase {phase!r} is not supported; use 'decode' or 'prefill'")
    length = (context if phase == "decode" else prompt) or cfg.max_positions
    what = "context" if phase == "decode" else "prompt"
    for label, v in (("batch", batch), (what, length)):
        if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
            raise ModelError(f"{label} must be a positive integer, got {v!r}")
    if length > cfg.max_positions:
        raise ModelError(f"{what}={length} exceeds {cfg.name}'s max_positions="
                         f"{cfg.max_positions}")
    tokens = 1 if phase == "decode" else length
    nodes = capture_nodes(cfg, batch=batch, tokens=tokens, length=length)
    return OpGraph(tuple(nodes), phase, cfg.name, batch, tokens, length)
