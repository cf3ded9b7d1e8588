"""What ``compile``, ``simulate`` and ``run`` resolve and print alike: the step, the system
(a device is the system of one), the partition over its devices, the memory plan rows."""

from __future__ import annotations

import argparse

__all__ = ["QUANTIZE_HELP", "ROUTING_HELP", "budget_rows", "partition_arg",
           "resolve_partition", "resolve_step", "with_model_flags"]

ROUTING_HELP = ("a mixture of experts: the routing measured from prompts (what `autosched "
                "run --record-routing` writes) instead of uniform")
QUANTIZE_HELP = ("quantize every linear but the LM head to this weight format on the fly "
                 "(round to nearest), for what-if studies")


def resolve_step(args: argparse.Namespace, *, phase: str | None = None,
                 batch: int | None = None, context: int | None = None,
                 capacity: int | None = None):
    """The :class:`~autosched.ir.Step` and the system of ``--model``/``--hw`` (as
    ``--quantize`` and ``--routing`` change it) and the step flags (each keyword
    overrides its flag)."""
    from autosched.pipeline import step_of
    from sim.system import load_system

    system = load_system(args.hw)
    model = args.model
    if getattr(args, "quantize", None) or getattr(args, "routing", None):
        from autosched.frontend import get_model_config

        model = with_model_flags(get_model_config(model), args)
    step = step_of(model, phase=phase or getattr(args, "phase", "decode"),
                   batch=batch or getattr(args, "batch", 1),
                   context=context or getattr(args, "context", None), capacity=capacity)
    return step, system


def with_model_flags(cfg, args: argparse.Namespace):
    """``cfg`` as ``--quantize`` and ``--routing`` change it (each when given)."""
    if getattr(args, "quantize", None):
        from autosched.frontend.quantized import with_quantization

        cfg = with_quantization(cfg, args.quantize)
    if getattr(args, "routing", None):
        from autosched.frontend.routed import with_routing

        cfg = with_routing(cfg, args.routing)
    return cfg


def partition_arg(text: str | None, step, system):
    """``--partition TPxPP`` as a Partition of the model's layers (None: not given)."""
    if text is None:
        return None
    from autosched.compiler import parse_partition

    return parse_partition(text, step, system)


def resolve_partition(text: str | None, step, system):
    """``--partition`` if given, else the fastest partition that fits (one device: 1x1)."""
    from autosched.compiler import best_partition

    return partition_arg(text, step, system) or best_partition(step, system)


def _gb(x: float) -> str:
    """Bytes in GB, or in MB below a tenth of a GB (small models)."""
    return f"{x / 1e9:.2f} GB" if x >= 1e8 else f"{x / 1e6:.2f} MB"


def budget_rows(b: dict) -> list[tuple[str, object]]:
    """The memory plan of one device as (label, value) rows."""
    return [
        ("weights", f"{_gb(b['weights'])} ({_gb(b['weights_data'])} of weights, "
                    f"{_gb(b['weights'] - b['weights_data'])} layout padding)"),
        ("kv_cache", f"{_gb(b['kv'])} ({_gb(b.get('kv_data', 0))} of keys and values)"),
        ("constants", _gb(b["constants"])),
        ("activations", f"{_gb(b['activations'])} (by liveness)"),
        ("free", f"{_gb(b['free'])} of {_gb(b['capacity'])}"),
    ]
