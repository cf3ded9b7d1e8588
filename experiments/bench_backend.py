"""``transformers`` ``generate()`` under ``torch.compile(backend="autosched")`` against eager.

A seeded small Llama (or Mistral / Qwen2) with a static cache generates ``--tokens``
greedy tokens eagerly and with its forward compiled by the autosched backend on each
preset. Prints whether the tokens agree, the ops the backend ran on the host, the graphs
it left to eager and why, and the simulated latency of every call (prefill, then decode).

    python -m experiments.bench_backend [--family llama] [--tokens 16] [--presets hbm-pim]
"""

from __future__ import annotations

import argparse
import time

import torch
import transformers

from autosched.backend import autosched_backend, clear_reports, reports
from sim.hwio import list_device_presets

_CLASSES = {"llama": ("LlamaConfig", "LlamaForCausalLM"),
            "mistral": ("MistralConfig", "MistralForCausalLM"),
            "qwen2": ("Qwen2Config", "Qwen2ForCausalLM")}


def small_model(family: str, seed: int = 0) -> torch.nn.Module:
    conf, cls = (getattr(transformers, n) for n in _CLASSES[family])
    torch.manual_seed(seed)
    cfg = conf(hidden_size=128, intermediate_size=344, num_hidden_layers=2,
               num_attention_heads=8, num_key_value_heads=2, vocab_size=503,
               max_position_embeddings=64)
    return cls(cfg).eval()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--family", choices=sorted(_CLASSES), default="llama")
    ap.add_argument("--tokens", type=int, default=16)
    ap.add_argument("--presets", default=",".join(list_device_presets()))
    args = ap.parse_args()
    kw = dict(max_new_tokens=args.tokens, min_new_tokens=args.tokens, do_sample=False,
              cache_implementation="static", pad_token_id=0)
    ids = torch.tensor([[3, 9, 27]])
    for hw in args.presets.split(","):
        model = small_model(args.family)
        want = model.generate(ids, **kw)
        torch._dynamo.reset()
        clear_reports()
        model.forward = torch.compile(model.forward, backend=autosched_backend,
                                      options={"hw": hw})
        t0 = time.perf_counter()
        got = model.generate(ids, **kw)
        wall = time.perf_counter() - t0
        reps = reports()
        calls = [c for r in reps for c in r.calls]
        print(f"{args.family} on {hw}: {args.tokens} tokens, same as eager: "
              f"{torch.equal(got, want)}; {len(reps)} graph(s), wall {wall:.1f} s")
        print(f"  host ops: {sorted({o for r in reps for o in r.host_ops}) or 'none'}; "
              f"eager graphs: {[r.eager for r in reps if r.eager] or 'none'}")
        print("  call  tokens  context  simulated us")
        for i, c in enumerate(calls):
            lat = f"{c.latency_ns / 1e3:.2f}" if not c.eager else f"eager: {c.eager}"
            print(f"  {i:>4}  {c.tokens:>6}  {c.context:>7}  {lat:>12}")


if __name__ == "__main__":
    main()
