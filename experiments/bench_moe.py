"""Mixture-of-experts decode on PIM: host experts, the naive placement and the searched
one, at batch 1..64 and contexts 1024 and 4096, under uniform and skewed routing.

For each (model, context, batch) the whole decode step is compiled and simulated once
with the naive placement (the moe space's default), under the first of the model's
partitions with which it fits a device (expert parallelism first, then with two pipeline
stages, then the fastest partition that fits);
the MoE layers are then re-timed alone for each placement and routing and put back in
place of the naive ones (``step = step_naive - layers * moe_naive + layers * moe``).
``host``: the host multiplies the experts, reading their weights from the banks (the
best such point; the rest of the step stays as compiled); ``naive``: the space's default
(every expert over all channels, a trip of an expert's average rows); ``tuned``: the
fastest point of the
moe space (placement, rows per dispatched trip, experts over channel groups, hot experts
replicated on every device where the step's spare memory holds the copies), tiles
larger than an expert's expected rows left out (they only add padding rows). Skewed
routing is Zipf (p_j ~ 1/(j+1)^1.2), as ``--routing`` would give it. Prints a table; ``--plot``
saves tokens/s per batch; ``--json`` the rows.

    python -m experiments.bench_moe --plot docs/moe.png
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from autosched.api import simulate_model
from autosched.families.moe import active_path
from autosched.families.moe.routing import encode
from autosched.families.registry import build, family_of, space_of
from autosched.pipeline import with_attrs
from search_spaces import Workload
from sim.errors import AutoschedError
from sim.system import load_system
from sim.timing.engine import simulate

MODELS = {  # name -> (config, system, partitions tried in order; None: the fastest that fits)
    "olmoe-1b-7b": ("experiments/configs/olmoe-1b-7b-0125-instruct.json", "hbm-pim", (None,)),
    "mixtral-8x7b": ("experiments/configs/mixtral-8x7b-v0.1.json", "hbm-pim-x16",
                     ("ep8x1", "ep8x2", None)),
    "qwen3-30b-a3b": ("experiments/configs/qwen3-30b-a3b.json", "hbm-pim-x16",
                      ("ep16x1", "ep8x2", None)),
}
VARIANTS = ("host", "naive", "tuned")


def parse_key(key: str) -> Workload:
    """The workload of a key ``op:dims:dtype[:attrs]`` (as ``simulate`` prints it)."""
    parts = key.split(":")
    op, dims, dtype = parts[0], parts[1], parts[2]
    attrs = {}
    for kv in (parts[3].split(",") if len(parts) > 3 else ()):
        k, v = kv.split("=", 1)
        attrs[k] = int(v) if v.lstrip("-").isdigit() else v
    d = {k: int(v) for k, v in (x.split("=") for x in dims.split(","))}
    return Workload.make(op, dtype, attrs or None, **d)


def skewed(e: int) -> str:
    """Zipf routing over ``e`` experts as the workload's ``route`` attribute holds it."""
    probs = 1.0 / np.arange(1, e + 1) ** 1.2
    return encode(probs / probs.sum())


def node_ns(w: Workload, point: dict, hw) -> float:
    return simulate(build(w, point, hw).program, hw).latency_ns


def search(w: Workload, hw, spare: float = float("inf"),
           layers: int = 1) -> dict[str, tuple[float, dict]]:
    """(ns, point) of the naive point, the best host point and the best point; points
    whose replicas need more than ``spare`` bytes over ``layers`` layers are left out."""
    most = int(active_path(w).max())
    fam, top = family_of(w), space_of(w, hw).param("tile").domain.values()[-1]
    plain = fam.weight_bytes(w, hw)
    pts = [p for p in space_of(w, hw).enumerate()
           if (p["tile"] <= max(1, 2 * most - 1) or p["tile"] == top)
           and layers * (fam.weight_bytes(w, hw, p) - plain) <= spare]
    timed = [(node_ns(w, p, hw), p) for p in pts]
    fam_default = family_of(w).default(w, hw)
    host = min((t for t in timed if t[1]["placement"] == "host"), key=lambda t: t[0])
    return {"naive": (node_ns(w, fam_default, hw), fam_default), "host": host,
            "tuned": min(timed, key=lambda t: t[0])}


def partition_name(p: dict) -> str:
    """``ep8x2`` / ``4x1`` of a partition's dict (``1x1``: one device)."""
    return f"{'ep' if p.get('experts') else ''}{p['tp']}x{p['pp']}"


def step_figures(cfg: str, hw_name: str, parts: tuple, batch: int, ctx: int):
    """The figures of the first of ``parts`` under which the step compiles and fits, or
    the error of the last one."""
    for part in parts:
        try:
            return simulate_model(cfg, hw_name, batch=batch, context=ctx, partition=part,
                                  baseline=False)
        except AutoschedError as e:
            err = e
    return err


def rows_for(model: str, contexts: list[int], batches: list[int]) -> list[dict]:
    cfg, hw_name, parts = MODELS[model]
    hw = load_system(hw_name).device
    out = []
    for ctx in contexts:
        for batch in batches:
            fig = step_figures(cfg, hw_name, parts, batch, ctx)
            if isinstance(fig, AutoschedError):
                out.append({"model": model, "system": hw_name, "context": ctx,
                            "batch": batch, "error": str(fig).splitlines()[0][-80:]})
                print(_line(out[-1]), flush=True)
                continue
            moe = next(r for r in fig.ops if r["op"] == "moe")
            w0, layers = parse_key(moe["workload"]), moe["count"]
            rest = fig.latency_ns - layers * moe["latency_ns"]
            for routing in ("uniform", "skewed"):
                w = w0 if routing == "uniform" else with_attrs(
                    w0, route=skewed(w0.dims["e"]))
                found = search(w, hw, fig.budget.get("free", 0),
                                -(-layers // fig.partition.get("pp", 1)))
                row = {"model": model, "system": hw_name, "partition": fig.partition,
                       "comm_share": fig.comm_share, "context": ctx, "batch": batch,
                       "routing": routing, "layers": layers}
                for v in VARIANTS:
                    ns, point = found[v]
                    step = rest + layers * ns
                    row[v] = {"moe_ns": ns, "step_ns": step, "tokens_per_s": batch / step * 1e9,
                              "point": point}
                out.append(row)
                print(_line(row), flush=True)
    return out


def _line(r: dict) -> str:
    if "error" in r:
        return f"{r['model']:<13} {'-':>6} {r['context']:>5} {r['batch']:>3}  {r['error']}"
    cells = "  ".join(f"{r[v]['tokens_per_s']:>9.1f} {r[v]['step_ns'] / 1e3:>9.1f}"
                      for v in VARIANTS)
    gain = r["naive"]["step_ns"] / r["tuned"]["step_ns"]
    t = r["tuned"]["point"]
    how = f"{t['placement']},tile={t['tile']},{t['split']}{t.get('groups', '')}" + (
        f",replicas={t['replicas']}" if t.get("replicas") else "")
    return (f"{r['model']:<13} {partition_name(r['partition']):>6} {r['context']:>5} "
            f"{r['batch']:>3} {r['routing']:<7}  {cells}  {gain:>5.2f}x  {how}")


HEADER = (f"{'model':<13} {'part':>6} {'ctx':>5} {'b':>3} {'routing':<7}  "
          + "  ".join(f"{v + ' tok/s':>9} {'us/step':>9}" for v in VARIANTS)
          + "  tuned/naive  tuned point")


def plot(rows: list[dict], path: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = sorted({(r["model"], r["context"]) for r in rows if "error" not in r})
    fig, axes = plt.subplots(1, len(panels), figsize=(4.5 * len(panels), 3.6), squeeze=False)
    for ax, (model, ctx) in zip(axes[0], panels, strict=True):
        for routing, style in (("uniform", "-"), ("skewed", "--")):
            mine = [r for r in rows if "error" not in r and (r["model"], r["context"],
                                                             r["routing"]) == (model, ctx, routing)]
            for v, color in zip(VARIANTS, ("C0", "C1", "C2"), strict=True):
                pts = [(r["batch"], r[v]["tokens_per_s"]) for r in mine]
                if pts:
                    ax.plot(*zip(*pts, strict=True), marker="o", color=color, linestyle=style,
                            label=f"{v} ({routing})")
        ax.set(xscale="log", yscale="log", xlabel="batch", ylabel="tokens/s",
               title=f"{model}, context {ctx}")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="olmoe-1b-7b,mixtral-8x7b,qwen3-30b-a3b")
    ap.add_argument("--contexts", default="1024,4096")
    ap.add_argument("--batches", default="1,2,4,8,16,32,64")
    ap.add_argument("--plot", default="")
    ap.add_argument("--json", default="")
    args = ap.parse_args(argv)
    ints = [int(x) for x in args.batches.split(",")]
    ctxs = [int(x) for x in args.contexts.split(",")]
    print(HEADER)
    rows: list[dict] = []
    for model in args.models.split(","):
        rows += rows_for(model, ctxs, ints)
    if args.plot:
        plot(rows, args.plot)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1, default=str))
    return rows


if __name__ == "__main__":
    main()
