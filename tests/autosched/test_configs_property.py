"""Property over the Llama-family config space: every drawn config compiles, validates,
simulates at or above its bound and generates the tokens of transformers on both
presets, or is refused with one line where transformers cannot run it either.

The draw (``experiments.llama_configs.sample_config``) covers llama/mistral/qwen2, head
dims 16..128, GQA ratios 1..7, odd sizes, 1-3 layers, tied or not, every RoPE scaling
type, sliding windows shorter than the run and biases. Seeded and small here: five
configs drawn by hypothesis (derandomized, so a failure shrinks to a small config) and
24 of the sweep's own draw, each its own test (half of them fused); the 200-config sweep
is ``experiments/bench_configs.py``.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from experiments.llama_configs import RngPicker, check, sample_config
from search_spaces.fusion import FULL_FUSION


class DataPicker:
    """The sampler's choices drawn by hypothesis (so failures shrink)."""

    def __init__(self, data: st.DataObject) -> None:
        self.data = data

    def int(self, lo: int, hi: int) -> int:
        return self.data.draw(st.integers(lo, hi))

    def choice(self, options: list):
        return self.data.draw(st.sampled_from(options))


@settings(max_examples=5, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data())
def test_random_configs_match_transformers(data: st.DataObject) -> None:
    hf = sample_config(DataPicker(data))
    for hw in ("hbm-pim", "aim-gddr6"):
        out = check(hf, hw, steps=6, seed=1)
        assert out.status in ("pass", "refused"), (hw, out.message, hf)


# The sweep's own draw (experiments/bench_configs.py), a seed of its own, a few dozen
# configs: each a separate test, so a parallel run spreads them over the workers. The
# odd ones run under the full fusion plan (every epilogue, the merged projections).
SWEEP_SEED, SWEEP_CONFIGS = 7, 24


@pytest.mark.parametrize("i", range(SWEEP_CONFIGS))
def test_seeded_sweep_configs_match_transformers(i: int) -> None:
    hf = sample_config(RngPicker(SWEEP_SEED * 100_003 + i))
    fusion = dict(FULL_FUSION) if i % 2 else None
    for hw in ("hbm-pim", "aim-gddr6"):
        out = check(hf, hw, steps=3, seed=i, fusion=fusion)
        assert out.status in ("pass", "refused"), (hw, out.message, hf, fusion)
