"""Serving figures: tokens/s and step latency against batch, context and prompt length.

For every model, system, phase, batch and context the step is simulated under three
placements: ``host`` (every operator on the host, the device as plain memory), ``pim``
(GEMVs and attention in the banks) and ``auto`` (each operator where its schedule puts
it, host and PIM overlapped); the ``autosched`` column is the fastest of the three, as
``compiler.choose_placement`` picks it (with ``--db``, from tuned schedules). A model goes on
one device of the system where it fits and on the whole system beyond; a case
that fits nowhere is marked ``n/f``. The table is printed as each row is measured; the
plot (tokens/s against batch) is saved to ``--plot``.

    python experiments/bench_serving.py [--models llama2-7b,llama2-70b,llama3-70b]
        [--systems hbm-pim-x16,aim-gddr6-x16] [--batches 1,2,4,8,16,32,64]
        [--contexts 1024,4096] [--prompts 512,2048] [--db PATH] [--json out.json]
        [--plot bench_serving.png]
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from autosched.api import simulate_model
from autosched.cli.models_cmd import parameter_count
from autosched.frontend import get_model_config
from sim.errors import AutoschedError
from sim.system import load_system
from sim.writes import write_atomic

MODELS = ("llama2-7b", "llama2-70b", "llama3-70b")
SYSTEMS = ("hbm-pim-x16", "aim-gddr6-x16")
SIDES = ("host", "pim", "auto")


def weight_bytes(model: str, system) -> int:
    """Bytes of the model's parameters in the device's element type."""
    return parameter_count(get_model_config(model)) * system.device.elem_bytes


def cases(batches: list[int], contexts: list[int], prompts: list[int]):
    """(phase, batch, context) of every step the table measures."""
    for ctx in contexts:
        for b in batches:
            yield "decode", b, ctx
    for p in prompts:
        yield "prefill", 1, p


def _one(model: str, hw, phase: str, batch: int, ctx: int, plan: str, db) -> dict:
    """The step under one placement plan: figures, or why it does not fit."""
    try:
        f = simulate_model(model, hw, db=db, phase=phase, batch=batch, context=ctx,
                           placement=plan, baseline=False, ops=False)
        extra = {} if f.devices == 1 else {
            "partition": f"{f.partition['tp']}x{f.partition['pp']}", "comm_share": f.comm_share}
    except AutoschedError as e:
        return {"fits": False, "why": str(e)}
    return {"fits": True, "latency_ns": f.latency_ns, "bound_ns": f.bound_ns,
            "tokens_per_s": f.tokens_per_s, **extra}


def measure(model: str, systems: list, phase: str, batch: int, ctx: int, db) -> dict:
    """One row: the first of ``systems`` (one device first) where some plan fits."""
    for hw in systems:
        plans = {p: _one(model, hw, phase, batch, ctx, p, db) for p in SIDES}
        if any(r["fits"] for r in plans.values()):
            break
    row = {"model": model, "system": hw.name, "phase": phase, "batch": batch, "context": ctx,
           "plans": plans}
    ok = {p: r for p, r in plans.items() if r["fits"]}
    if ok:
        best = min(ok, key=lambda p: (ok[p]["latency_ns"], SIDES.index(p)))
        sides = [ok[p]["latency_ns"] for p in ("host", "pim") if p in ok]
        row.update(best=best, latency_ns=ok[best]["latency_ns"],
                   tokens_per_s=ok[best]["tokens_per_s"], bound_ns=ok[best]["bound_ns"],
                   gain=(min(sides) / ok[best]["latency_ns"]) if sides else math.nan,
                   partition=ok[best].get("partition", "1"))
    return row


def _fmt(r: dict, plan: str) -> str:
    p = r["plans"][plan]
    return f"{p['tokens_per_s']:>10.1f}" if p["fits"] else f"{'n/f':>10}"


HEADER = (f"{'model':<11} {'system':<14} {'phase':<7} {'batch':>5} {'ctx':>5} "
          f"{'host tok/s':>10} {'pim tok/s':>10} {'auto tok/s':>10} {'best':>5} "
          f"{'step ms':>9} {'lat/bound':>9} {'gain':>5} {'TPxPP':>6}")


def line(r: dict) -> str:
    """One table row (``gain``: the best plan over the better of host-only and PIM-only)."""
    head = (f"{r['model']:<11} {r['system']:<14} {r['phase']:<7} {r['batch']:>5} "
            f"{r['context']:>5} " + " ".join(_fmt(r, p) for p in SIDES))
    if "best" not in r:
        return head + "  does not fit: " + r["plans"]["auto"]["why"][:60]
    return head + (f" {r['best']:>5} {r['latency_ns'] / 1e6:>9.3f} "
                   f"{r['latency_ns'] / r['bound_ns']:>9.2f} {r['gain']:>5.2f} "
                   f"{r['partition']:>6}")


def plot(rows: list[dict], path: Path) -> None:
    """Tokens/s against batch: one panel per (model, context), one line per plan and
    system (solid: the first system of the panel, dashed: the next)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = sorted({(r["model"], r["context"]) for r in rows if r["phase"] == "decode"})
    if not panels:
        return
    fig, axes = plt.subplots(1, len(panels), figsize=(4.5 * len(panels), 3.6), squeeze=False)
    for ax, (model, ctx) in zip(axes[0], panels, strict=True):
        mine = [r for r in rows if (r["model"], r["context"], r["phase"]) ==
                (model, ctx, "decode")]
        for system in dict.fromkeys(r["system"] for r in mine):  # one device, then several
            for plan, color in zip(SIDES, ("C0", "C1", "C2"), strict=True):
                pts = [(r["batch"], r["plans"][plan]["tokens_per_s"]) for r in mine
                       if r["system"] == system and r["plans"][plan]["fits"]]
                if pts:
                    ax.plot(*zip(*pts, strict=True), marker="o", color=color,
                            linestyle="-" if system == mine[0]["system"] else "--",
                            label=f"{plan} ({system})")
        ax.set(xscale="log", yscale="log", xlabel="batch", ylabel="tokens/s",
               title=f"{model}, context {ctx}")
        ax.legend(fontsize=7)
    fig.tight_layout()
    write_atomic(Path(path), lambda tmp: fig.savefig(tmp, dpi=110,
                                                   format=Path(path).suffix[1:] or "png"))
    plt.close(fig)


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


def main(argv: list[str] | None = None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--systems", default=",".join(SYSTEMS))
    ap.add_argument("--batches", default="1,2,4,8,16,32,64")
    ap.add_argument("--contexts", default="1024,4096")
    ap.add_argument("--prompts", default="512,2048")
    ap.add_argument("--db", default=None, help="tuned schedules (and plans) from this database")
    ap.add_argument("--json", default=None, metavar="PATH", help="also save the rows here")
    ap.add_argument("--plot", default="bench_serving.png", metavar="PATH")
    args = ap.parse_args(argv)
    systems = [load_system(s) for s in args.systems.split(",") if s]
    rows: list[dict] = []
    print(HEADER, flush=True)
    for model in args.models.split(","):
        for sysm in systems:
            # one device of the system first, unless the weights alone overflow it
            first = [load_system(sysm.device)] if weight_bytes(model, sysm) < \
                sysm.device.capacity_bytes else []
            for phase, b, ctx in cases(_ints(args.batches), _ints(args.contexts),
                                       _ints(args.prompts)):
                rows.append(measure(model, first + [sysm], phase, b, ctx, args.db))
                print(line(rows[-1]), flush=True)
                if args.json:
                    write_atomic(Path(args.json), json.dumps(rows, indent=1))
    gains = [r for r in rows if "best" in r and not math.isnan(r["gain"])]
    if gains:
        top = max(gains, key=lambda r: r["gain"])
        print(f"\nlargest gain over the better of host-only and PIM-only: {top['gain']:.2f}x "
              f"({top['model']} {top['phase']} batch {top['batch']} context {top['context']} "
              f"on {top['system']}, plan {top['best']})")
    if args.plot:
        plot(rows, Path(args.plot))
        print(f"plot: {args.plot}")
    return rows


if __name__ == "__main__":
    main()
