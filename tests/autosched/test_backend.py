"""The torch.compile backend: the same tokens as eager, the simulated latency of every
call, host ops and eager graphs reported, and the entry point behind the string."""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

import pytest
import torch
import transformers

from autosched.backend import autosched_backend, clear_reports, reports

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def fresh_dynamo():
    """Each test compiles from scratch (Dynamo caches compiled frames per code object)."""
    torch._dynamo.reset()
    clear_reports()
    yield
    torch._dynamo.reset()


def tiny_llama(seed: int = 0) -> transformers.LlamaForCausalLM:
    torch.manual_seed(seed)
    cfg = transformers.LlamaConfig(hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2,
                                   vocab_size=101, max_position_embeddings=64)
    return transformers.LlamaForCausalLM(cfg).eval()


def greedy(step, model, prompt: list[int], n: int) -> list[int]:
    """``n`` greedy tokens after ``prompt``, one ``step`` (model or compiled) call each."""
    cache = transformers.StaticCache(config=model.config, max_cache_len=len(prompt) + n)
    ids, out, pos = torch.tensor([prompt]), [], 0
    with torch.no_grad():
        for _ in range(n):
            p = torch.arange(pos, pos + ids.shape[1])[None]
            logits = step(input_ids=ids, cache=cache, use_cache=True, position_ids=p).logits
            pos += ids.shape[1]
            ids = logits[:, -1:].argmax(-1)
            out.append(int(ids))
    return out


def test_compiled_module_gives_the_tokens_of_eager() -> None:
    model = tiny_llama()
    want = greedy(model, model, [1, 5, 7], 16)
    clear_reports()
    compiled = torch.compile(model, backend=autosched_backend, options={"hw": "hbm-pim"})
    assert greedy(compiled, model, [1, 5, 7], 16) == want
    reps = [r for r in reports() if not r.eager]
    assert reps and all(r.host_ops == () for r in reps)  # the Llama family: no host op
    calls = [c for r in reps for c in r.calls]
    assert len(calls) == 16 and all(c.latency_ns > 0 and not c.eager for c in calls)
    decode = [c for c in calls if c.tokens == 1]
    assert [c.context for c in decode] == list(range(4, 19))


def test_generate_with_a_compiled_forward_and_a_static_cache() -> None:
    model = tiny_llama(1)
    kw = dict(max_new_tokens=16, min_new_tokens=16, do_sample=False,
              cache_implementation="static", pad_token_id=0)
    ids = torch.tensor([[3, 9]])
    want = model.generate(ids, **kw)
    clear_reports()
    model.forward = torch.compile(model.forward, backend=autosched_backend,
                                  options={"hw": "aim-gddr6"})
    assert torch.equal(model.generate(ids, **kw), want)
    assert sum(len(r.latencies_ns) for r in reports()) == 16


def test_a_graph_without_a_decoder_runs_eagerly_and_says_why() -> None:
    clear_reports()
    f = torch.compile(lambda x: torch.sin(x) * 2, backend=autosched_backend)
    x = torch.randn(4)
    assert torch.equal(f(x), torch.sin(x) * 2)
    (rep,) = reports()
    assert "embedding" in rep.eager


def test_unknown_option_is_refused() -> None:
    from autosched.frontend import ModelError

    with pytest.raises(ModelError, match="unknown autosched backend option"):
        autosched_backend(torch.fx.symbolic_trace(torch.nn.Linear(2, 2)), [torch.randn(1, 2)],
                          options={"precision": "fp8"})


def test_the_string_autosched_names_the_backend(tmp_path, monkeypatch) -> None:
    """The entry point pyproject declares is what torch.compile(backend="autosched") finds."""
    from torch._dynamo.backends import registry

    eps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]
    target = eps["torch_dynamo_backends"]["autosched"]
    dist = tmp_path / "autosched_ep-0.0.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: autosched-ep\nVersion: 0.0.0\n")
    (dist / "entry_points.txt").write_text(f"[torch_dynamo_backends]\nautosched = {target}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    registry._discover_entrypoint_backends.cache_clear()
    monkeypatch.delitem(registry._COMPILER_FNS, "autosched", raising=False)
    monkeypatch.delitem(registry._BACKENDS, "autosched", raising=False)
    registry._discover_entrypoint_backends()
    assert "autosched" in registry.list_backends()
    assert registry.lookup_backend("autosched") is autosched_backend
    assert sys.modules["autosched.backend"].autosched_backend is autosched_backend
