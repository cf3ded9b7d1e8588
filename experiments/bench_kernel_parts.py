"""Where each kernel of one decode step spends its time, at any weight format.

Per distinct workload of the step (the full fusion plan; ``--quantize`` rounds every
linear but the LM head as ``autosched simulate --quantize`` does): how many the step has,
its default schedule's latency, its family's bound, and the ablation of
``Family.decompose`` (each cost made free in turn: refresh, activations, bus, host, the
rest). With ``--space``, every valid point of the spaces of at most ``--limit`` points is
simulated as well and the best printed beside the default (the default's headroom
within its own space).

    python -m experiments.bench_kernel_parts [--model llama2-7b] [--hw aim-gddr6-int4]
        [--quantize w4g128] [--context 1024] [--space] [--limit 1000]
"""

from __future__ import annotations

import argparse

from autosched.families import family_of
from autosched.frontend import get_model_config
from autosched.frontend.quantized import with_quantization
from autosched.pipeline import step_graph, step_of
from search_spaces.fusion import FULL_FUSION
from sim.errors import AutoschedError
from sim.hwio import load_hardware
from sim.timing.decompose import PARTS


def space_best(workload, hw, limit: int) -> tuple[float, int] | None:
    """(fastest simulated latency, valid points) of ``workload``'s space, or None when it
    has more than ``limit`` points."""
    fam = family_of(workload)
    space = fam.space(workload, hw)
    if space.size() > limit:
        return None
    best, n = float("inf"), 0
    for point in space.enumerate():
        try:
            best = min(best, fam.decompose(workload, point, hw)["latency"])
        except AutoschedError:  # a point the simulator refuses counts as not valid
            continue
        n += 1
    return best, n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="llama2-7b")
    ap.add_argument("--hw", default="aim-gddr6")
    ap.add_argument("--quantize", default=None, metavar="w8|w4g128")
    ap.add_argument("--context", type=int, default=1024)
    ap.add_argument("--space", action="store_true")
    ap.add_argument("--limit", type=int, default=1000)
    args = ap.parse_args()
    cfg = get_model_config(args.model)
    cfg = with_quantization(cfg, args.quantize) if args.quantize else cfg
    hw = load_hardware(args.hw)
    counts: dict[str, list] = {}
    for node in step_graph(step_of(cfg, context=args.context), dict(FULL_FUSION)):
        counts.setdefault(node.workload.key, [node.workload, 0])[1] += 1
    head = f"{'count':>5}  {'default ns':>10} {'bound ns':>10} " + " ".join(
        f"{p:>11}" for p in PARTS) + ("  space best (points)" if args.space else "") + \
        "  workload"
    print(head)
    total = 0.0
    for key, (w, n) in counts.items():
        fam = family_of(w)
        d = fam.decompose(w, fam.default(w, hw), hw)
        total += n * d["latency"]
        best = ""
        if args.space:
            b = space_best(w, hw, args.limit)
            best = f"  {'-':>20}" if b is None else f"  {b[0]:>11.1f} ({b[1]:>5})"
        print(f"{n:>5}  {d['latency']:>10.1f} {fam.bound(w, hw):>10.1f} "
              + " ".join(f"{d[p]:>11.1f}" for p in PARTS) + best + f"  {key}")
    print(f"\nsum of the kernels alone: {total / 1e3:,.1f} us")


if __name__ == "__main__":
    main()
