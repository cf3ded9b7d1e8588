"""Capture: ``torch.export`` of one inference step on meta tensors -> :class:`OpGraph`.

The decoder's RMSNorm, rotary embedding and cached attention are custom ops
(:mod:`.kernels`) and arrive as single leaf nodes. Linear layers become ``gemv`` (at most
:data:`GEMV_MAX_M` activation rows) or ``gemm``; ``embedding``, ``silu``, ``mul``, ``add``
and ``argmax`` map one to one. Pure data movement (views, transposes, slices, cache writes,
stacking, dtype copies) is absorbed: a consumer's inputs are the operators that produced
the data. Any other op raises :class:`ModelError` naming the op and where it came from.
Prefill computes logits for the last token only, as generation does.
"""

from __future__ import annotations

import math
import operator

import torch
from torch import nn

from search_spaces.workload import Workload

from .config import ModelConfig, ModelError
from .graph import OpGraph, OpNode
from .llama import LlamaModel, build_model, empty_cache
from .zoo import get_model_config

__all__ = ["GEMV_MAX_M", "capture"]

GEMV_MAX_M = 8
_DTYPES = {torch.float16: "fp16", torch.bfloat16: "bf16", torch.float32: "fp32"}
_ABSORBED = frozenset({
    "aten::view", "aten::reshape", "aten::_unsafe_view", "aten::transpose", "aten::permute",
    "aten::t", "aten::unsqueeze", "aten::squeeze", "aten::expand", "aten::cat", "aten::stack",
    "aten::slice", "aten::select", "aten::clone", "aten::contiguous", "aten::_to_copy",
    "aten::to", "aten::alias", "aten::detach", "aten::index_copy", "aten::lift_fresh_copy",
})
_MODULE_ROLES = {"gate_proj": "ffn_gate", "up_proj": "ffn_up", "down_proj": "ffn_down",
                 "norm": "final_norm", "mlp": "ffn"}
_ELEMENTWISE = {"aten::silu": "silu", "aten::mul": "mul", "aten::add": "add"}


class _Step(nn.Module):
    """One generation step: the decoder, then greedy argmax over the last token's logits."""

    def __init__(self, model: LlamaModel) -> None:
        super().__init__()
        self.model = model

    def forward(self, ids: torch.Tensor, positions: torch.Tensor, k_cache: torch.Tensor,
                v_cache: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        logits, k_cache, v_cache = self.model(ids, positions, k_cache, v_cache, logits_last=True)
        return logits.argmax(dim=-1), k_cache, v_cache


def capture(model: ModelConfig | str, *, phase: str = "decode", batch: int = 1,
            context: int | None = None, prompt: int | None = None) -> OpGraph:
    """Operator graph of one step of ``model`` (a config, built-in name or config.json path).

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
        if not isinstance(v, int) or v <= 0:
            raise ModelError(f"{label} must be a positive integer, got {v!r}")
    if length > cfg.max_positions:
        raise ModelError(f"{what}={length} exceeds {cfg.name}'s max_positions="
                         f"{cfg.max_positions}")
    tokens = 1 if phase == "decode" else length
    ids = torch.zeros((batch, tokens), dtype=torch.long, device="meta")
    positions = torch.arange(length - tokens, length, device="meta")
    k_cache, v_cache = empty_cache(cfg, batch, length, device="meta")
    step = _Step(build_model(cfg, device="meta"))
    exported = torch.export.export(step, (ids, positions, k_cache, v_cache), strict=False)
    nodes = _translate(exported.graph)
    return OpGraph(tuple(nodes), phase, cfg.name, batch, tokens, length)


def _where(node: torch.fx.Node) -> tuple[str, int | None, str]:
    """(module path, decoder layer, last path component) of the module that ran ``node``."""
    stack = node.meta.get("nn_module_stack") or {}
    path = list(stack.values())[-1][0] if stack else ""
    parts = [p for p in path.split(".") if p and p != "model"]
    layer = None
    for a, b in zip(parts, parts[1:], strict=False):
        if a == "layers" and b.isdigit():
            layer = int(b)
    return ".".join(parts), layer, (parts[-1] if parts else "")


def _rows(shape: torch.Size) -> tuple[int, int]:
    """(product of leading dims, last dim) of a shape."""
    n = shape[-1] if len(shape) else 1
    return math.prod(shape[:-1]), n


def _map(name: str, node: torch.fx.Node, last: str) -> tuple[str, str, dict, dict] | None:
    """(family, role, dims, attrs) for a mapped op, None if ``name`` has no mapping."""
    a = [x.meta["val"] if isinstance(x, torch.fx.Node) else x for x in node.args]
    out = node.meta["val"]
    role = _MODULE_ROLES.get(last, last)
    if name == "aten::linear":
        m, k = _rows(a[0].shape)
        return ("gemv" if m <= GEMV_MAX_M else "gemm"), role, dict(m=m, n=a[1].shape[0], k=k), {}
    if name == "aten::embedding":
        return "embedding", role, dict(m=a[1].numel(), n=a[0].shape[1], v=a[0].shape[0]), {}
    if name == "autosched::rmsnorm":
        m, n = _rows(a[0].shape)
        return "rmsnorm", role, dict(m=m, n=n), {}
    if name in ("aten::layer_norm", "aten::native_layer_norm"):
        m, n = _rows(a[0].shape)
        return "layernorm", role, dict(m=m, n=n), {}
    if name == "autosched::rope":
        b, s, hq, d = a[0].shape
        return "rope", "rope", dict(m=b * s, h=hq + a[1].shape[2], d=d), {}
    if name == "autosched::attention":
        b, s, h, d = a[0].shape
        kvh, length = a[1].shape[1], a[1].shape[2]
        return "attention", "attn", dict(b=b, q=s, h=h, kvh=kvh, d=d, l=length), {}
    if name == "aten::argmax":
        n = a[0].shape[a[1]] if len(a) > 1 and a[1] is not None else a[0].numel()
        return "argmax", "argmax", dict(m=max(out.numel(), 1), n=n), {}
    fn = _ELEMENTWISE.get(name)
    if fn is None:
        return None
    m, n = _rows(out.shape)
    block = role or "model"
    return "elementwise", f"{block}_residual" if fn == "add" else f"{block}_{fn}", \
        dict(m=max(m, 1), n=n), {"fn": fn}


def _dtype(node: torch.fx.Node, path: str) -> str:
    """Our dtype name of the op's first floating-point input (else of its output)."""
    vals = [x.meta.get("val") for x in node.args if isinstance(x, torch.fx.Node)]
    vals = [v for v in vals if isinstance(v, torch.Tensor) and v.is_floating_point()]
    dt = (vals[0] if vals else node.meta["val"]).dtype
    if dt not in _DTYPES:
        raise ModelError(f"{node.target} in module {path or '<root>'!r} computes in {dt}; "
                         f"only {', '.join(_DTYPES.values())} are supported")
    return _DTYPES[dt]


def _translate(graph: torch.fx.Graph) -> list[OpNode]:
    """Map an exported graph's call_function nodes to OpNodes (see the module docstring)."""
    producers: dict[torch.fx.Node, tuple[str, ...]] = {}
    out: list[OpNode] = []
    names: set[str] = set()
    for node in graph.nodes:
        if node.op != "call_function":
            producers[node] = ()
            continue
        srcs: list[str] = []
        for dep in node.all_input_nodes:
            srcs.extend(s for s in producers[dep] if s not in srcs)
        schema = getattr(node.target, "_schema", None)
        name = schema.name if schema is not None else getattr(node.target, "__name__", "")
        if node.target is operator.getitem or name in _ABSORBED:
            producers[node] = tuple(srcs)
            continue
        path, layer, last = _where(node)
        mapped = _map(name, node, last)
        if mapped is None:
            trace = (node.meta.get("stack_trace") or "").strip().splitlines()[-2:]
            raise ModelError(
                f"aten op {node.target} has no autosched operator mapping (module "
                f"{path or '<root>'!r}); rewrite that code with supported ops"
                + (":\n" + "\n".join(trace) if trace else ""))
        family, role, dims, attrs = mapped
        base = role if layer is None else f"l{layer}.{role}"
        op_name, i = base, 2
        while op_name in names:
            op_name, i = f"{base}#{i}", i + 1
        names.add(op_name)
        wl = Workload.make(family, _dtype(node, path), attrs or None, **dims)
        out.append(OpNode(op_name, wl, tuple(srcs), layer, role))
        producers[node] = (op_name,)
    return out
