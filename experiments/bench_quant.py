"""Quantized weights as hardware co-design: decode steps at W16, W8 and W4 on every preset
and integer-format variant, and what each unit feature buys.

Per model, weight format (``fp16``; ``w8`` per channel; ``w4g128``, every linear but the
LM head rounded on the fly) and device (the presets and ``sim/presets/variants``): where
the weights are dequantized (``bank``: packed codes in the banks; ``load``: the units do
not take the format, the banks hold 16-bit values), decode tokens/s at context
``--context`` with the default schedules and the full fusion plan, energy per token, the
bytes a token reads (linear weights as stored plus the KV cache), the physical limit of
the device for those bytes (bytes over the units' column bandwidth in that format) and
the step's ratio to it, and the speedup over the same model at fp16 on the base preset.
Then the unit features (per base preset: the variant's added area and the speedup it buys
at each format), and whether a 70B model at W4 fits the four-device system
``experiments/hw/aim-gddr6-int4-x4.yaml``.

    python -m experiments.bench_quant [--models llama2-7b,...] [--context 1024] [--json]
                                      [--markdown]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from autosched.api import simulate_model
from autosched.families import family_of
from autosched.frontend import get_model_config
from autosched.frontend.quantized import with_quantization
from autosched.pipeline import step_graph, step_of
from search_spaces.fusion import FULL_FUSION
from sim.errors import AutoschedError
from sim.formats import dequant_site, weight_format
from sim.hwio import list_device_presets, list_variants, load_hardware
from sim.system import load_system

HERE = Path(__file__).parent
MODELS = ("llama2-7b", "llama3-8b", str(HERE / "configs" / "qwen2-7b.json"))
FORMATS = ("fp16", "w8", "w4g128")
SYSTEM_70B = HERE / "hw" / "aim-gddr6-int4-x4.yaml"


def _cfg(model: str, fmt: str):
    cfg = get_model_config(model)
    return cfg if fmt == "fp16" else with_quantization(cfg, fmt)


def token_bytes(cfg, hw, context: int) -> float:
    """Bytes one decode token reads from the banks: every linear's weights as the device
    stores them and every layer's KV cache (families that hold weights or a cache in the
    banks; an embedding reads one row and is left out)."""
    graph = step_graph(step_of(cfg, context=context), dict(FULL_FUSION))
    total = 0.0
    for n in graph:
        fam = family_of(n.workload)
        if fam.in_banks and fam.memory_kind == "weights":
            total += fam.weight_bytes(n.workload, hw)
        total += fam.cache_bytes(n.workload, hw)
    return total


def column_bandwidth(hw, fmt: str) -> float:
    """GB/s of weight bytes all units consume at once in ``fmt`` where the banks hold it."""
    f = weight_format(fmt)
    if dequant_site(f, hw) != "bank":
        return hw.internal_bandwidth_gbps
    return hw.internal_bandwidth_gbps * hw.pim_column_ns / hw.format_column_ns(f.kind)


def row(model: str, fmt: str, hw_name: str, context: int) -> dict:
    hw = load_hardware(hw_name)
    cfg = _cfg(model, fmt)
    fig = simulate_model(cfg, hw_name, context=context, fusion=dict(FULL_FUSION),
                         baseline=False, ops=False)
    nbytes = token_bytes(cfg, hw, context)
    limit_ns = nbytes / column_bandwidth(hw, fmt)
    return {"model": cfg.name, "format": fmt, "hardware": hw_name,
            "site": dequant_site(weight_format(fmt), hw), "latency_ns": fig.latency_ns,
            "tokens_per_s": fig.tokens_per_s, "energy_mj_per_token": fig.energy_per_token_pj / 1e9,
            "bytes_per_token": nbytes, "limit_ns": limit_ns,
            "over_limit": fig.latency_ns / limit_ns, "bound_ns": fig.bound_ns}


def base_of(hw_name: str) -> str:
    """The preset a variant modifies (its name's prefix)."""
    return next(p for p in sorted(list_device_presets(), key=len, reverse=True)
                if hw_name.startswith(p))


def fits_70b(context: int, fmt: str = "w4g128") -> dict:
    """llama2-70b at ``fmt`` on the four-device system: the partition chosen and its
    memory, or why it does not fit."""
    system = load_system(SYSTEM_70B)
    cfg = _cfg("llama2-70b", fmt)
    out = {"system": system.name, "devices": system.devices, "model": f"llama2-70b {fmt}"}
    try:
        fig = simulate_model(cfg, system, context=context, fusion=dict(FULL_FUSION),
                             baseline=False, ops=False)
    except AutoschedError as e:
        return {**out, "fits": False, "why": str(e)}
    free = min(b["free"] for b in fig.budgets)
    return {**out, "fits": True, "partition": f"tp={fig.partition['tp']} "
            f"pp={fig.partition['pp']}", "tokens_per_s": fig.tokens_per_s,
            "free_gb_per_device": free / 1e9}


def features(rows: list[dict]) -> list[dict]:
    """Per variant and format: speedup over its base preset at the same format, per added
    unit area."""
    by = {(r["model"], r["format"], r["hardware"]): r for r in rows}
    out = []
    for v in list_variants():
        hw, base = load_hardware(v), base_of(v)
        for (m, f, h), r in by.items():
            if h != v or (m, f, base) not in by:
                continue
            gain = by[(m, f, base)]["latency_ns"] / r["latency_ns"]
            out.append({"variant": v, "model": m, "format": f, "takes": ", ".join(
                hw.formats.weights), "added_mm2_per_unit": hw.formats.added_area_mm2,
                "speedup_vs_base": gain})
    return out


def markdown(rows: list[dict], feats: list[dict], big: dict | None) -> str:
    ref = {(r["model"]): r for r in rows if r["format"] == "fp16" and r["hardware"] in
           list_device_presets() and r["hardware"] == "aim-gddr6"}
    lines = ["| model | weights | device | dequant | tokens/s | mJ/token | MB/token | "
             "limit us | latency/limit | vs fp16 on aim-gddr6 |", "|" + "---|" * 10]
    for r in rows:
        base = ref.get(r["model"])
        speed = f"{base['latency_ns'] / r['latency_ns']:.2f}x" if base else "-"
        lines.append(f"| {r['model']} | {r['format']} | {r['hardware']} | {r['site']} | "
                     f"{r['tokens_per_s']:,.0f} | {r['energy_mj_per_token']:.1f} | "
                     f"{r['bytes_per_token'] / 1e6:,.0f} | {r['limit_ns'] / 1e3:,.0f} | "
                     f"{r['over_limit']:.2f} | {speed} |")
    lines += ["", "| variant | takes | added mm^2 per unit (45 nm) | model | weights | "
              "speedup vs its base preset |", "|" + "---|" * 6]
    for f in feats:
        lines.append(f"| {f['variant']} | {f['takes']} | {f['added_mm2_per_unit']:.3f} | "
                     f"{f['model']} | {f['format']} | {f['speedup_vs_base']:.2f}x |")
    if big is None:
        return "\n".join(lines)
    if "fp16" in big:
        f = big["fp16"]
        lines += ["", f"{f['model']} on {f['system']}: "
                  + ("fits" if f["fits"] else f"does not fit: {f['why'][:160]}")]
    lines += ["", f"{big['model']} on {big['system']} ({big['devices']} devices): "
              + (f"fits, {big['partition']}, {big['tokens_per_s']:,.0f} tokens/s, "
                 f"{big['free_gb_per_device']:.1f} GB free per device" if big["fits"]
                 else f"does not fit: {big['why']}")]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--formats", default=",".join(FORMATS))
    ap.add_argument("--devices", default=",".join((*list_device_presets(), *list_variants())))
    ap.add_argument("--context", type=int, default=1024)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()
    devices = [d for d in args.devices.split(",") if load_system(d).devices == 1]
    rows = []
    for model in args.models.split(","):
        for fmt in args.formats.split(","):
            for hw in devices:
                rows.append(row(model, fmt, hw, args.context))
                r = rows[-1]
                if not (args.json or args.markdown):
                    print(f"{r['model']:<12} {fmt:<7} {hw:<15} {r['site']:<5} "
                          f"{r['tokens_per_s']:>8.0f} tok/s {r['energy_mj_per_token']:>6.1f} mJ "
                          f"{r['bytes_per_token'] / 1e6:>7.0f} MB lat/limit "
                          f"{r['over_limit']:.2f}", flush=True)
    feats = features(rows)
    big = {**fits_70b(args.context), "fp16": fits_70b(args.context, "fp16")}
    if args.json:
        print(json.dumps({"rows": rows, "features": feats, "70b": big}, indent=2))
    elif args.markdown:
        print(markdown(rows, feats, big))
    else:
        print()
        print(markdown(rows, feats, big))


if __name__ == "__main__":
    main()
