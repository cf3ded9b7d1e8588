"""Every architecture's tiny checkpoint under ``run --check`` on every preset, unfused and
under the full fusion plan: the README's architecture table.

    python -m experiments.bench_archs [--steps 8] [--archs llama,qwen3] [--json]

One row per (architecture, preset, plan): passed, worst relative logit error against the
tolerance, tokens equal to ``generate()``, and the host ops left per layer.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections import Counter
from pathlib import Path

from experiments.archs import ARCHS, tiny_checkpoint
from search_spaces.fusion import FULL_FUSION
from sim.hwio import list_device_presets


def host_ops(folder: Path) -> dict[str, int]:
    """ATen ops left on the host in layer 0 of the checkpoint's decode step, with counts."""
    from autosched.pipeline import model_graph

    _, g = model_graph(str(folder), context=8)
    return dict(Counter(n.workload.attr("fn").split("-")[0] for n in g.nodes
                        if n.workload.op == "extern" and n.layer == 0))


def row(arch: str, folder: Path, hw: str, steps: int, fused: bool) -> dict:
    from autosched.api import run_check

    t0 = time.perf_counter()
    try:
        rep = run_check(str(folder), hw, steps=steps, fusion=dict(FULL_FUSION) if fused else None)
        out = {"passed": rep.passed, "max_rel_err": rep.max_rel_err, "tolerance": rep.tolerance,
               "tokens_match": rep.tokens_match, "error": ""}
    except Exception as e:  # noqa: BLE001 - a row records every failure
        out = {"passed": False, "max_rel_err": float("nan"), "tolerance": float("nan"),
               "tokens_match": False, "error": f"{type(e).__name__}: {e}"[:300]}
    return {"arch": arch, "hw": hw, "fusion": "full" if fused else "none",
            "wall_s": time.perf_counter() - t0, **out}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--archs", default=",".join(ARCHS))
    ap.add_argument("--presets", default=",".join(list_device_presets()))
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rows, hosts = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        for arch in args.archs.split(","):
            folder = tiny_checkpoint(arch, Path(tmp) / arch)
            hosts[arch] = host_ops(folder)
            for hw in args.presets.split(","):
                for fused in (False, True):
                    rows.append(row(arch, folder, hw, args.steps, fused))
                    r = rows[-1]
                    print(f"{arch:<12} {hw:<10} {r['fusion']:<5} "
                          f"{'pass' if r['passed'] else 'FAIL'} rel {r['max_rel_err']:.2e} "
                          f"tol {r['tolerance']:.2e} tokens {r['tokens_match']} {r['error']}",
                          flush=True)
    if args.json:
        print(json.dumps({"rows": rows, "host_ops": hosts}, indent=2, default=str))
        return
    print("\nhost ops per layer (layer 0):")
    for arch, ops in hosts.items():
        print(f"{arch:<12} " + (", ".join(f"{k} x{v}" for k, v in sorted(ops.items())) or "-"))
    print(f"\n{sum(r['passed'] for r in rows)} of {len(rows)} passed")


if __name__ == "__main__":
    main()
