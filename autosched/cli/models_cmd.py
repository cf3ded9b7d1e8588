"""``autosched models [--json]``: the built-in models and their shapes."""

from __future__ import annotations

import argparse

from .output import print_json, table


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("models", help="list the built-in models with their shapes")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(run=_run)


def parameter_count(cfg) -> int:
    """Weights of the decoder: embeddings, attention and MLP projections, norms, head."""
    attn = cfg.hidden * (cfg.q_dim + 2 * cfg.kv_dim) + cfg.q_dim * cfg.hidden
    if cfg.attention_bias:
        attn += cfg.q_dim + 2 * cfg.kv_dim
    mlp = 3 * cfg.hidden * cfg.intermediate
    layer = attn + mlp + 2 * cfg.hidden
    head = 0 if cfg.tie_embeddings else cfg.vocab * cfg.hidden
    return cfg.vocab * cfg.hidden + cfg.layers * layer + cfg.hidden + head


def _run(args: argparse.Namespace) -> int:
    from ..frontend import get_model_config, list_models

    cfgs = [get_model_config(n) for n in list_models()]
    if args.json:
        print_json([{**c.to_dict(), "parameters": parameter_count(c)} for c in cfgs])
        return 0
    rows = [[c.name, c.model_type, c.layers, c.hidden, c.intermediate, c.heads, c.kv_heads,
             c.head_dim, c.vocab, c.dtype, f"{parameter_count(c) / 1e9:.3f} B"] for c in cfgs]
    print(table(["name", "type", "layers", "hidden", "intermediate", "heads", "kv heads",
                 "head dim", "vocab", "dtype", "parameters"], rows))
    return 0
