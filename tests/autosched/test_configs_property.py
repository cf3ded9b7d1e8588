"""Property over the config space of every supported architecture: every drawn config
compiles, validates, simulates at or above its bound and generates the tokens of
transformers, or is refused with one line where transformers cannot run it either.

The Llama-family draw (``experiments.llama_configs.sample_config``) covers head dims
16..128, GQA ratios 1..7, odd sizes, 1-3 layers, tied or not, every RoPE scaling type,
sliding windows shorter than the run and biases: three configs drawn by hypothesis
(derandomized, so a failure shrinks to a small config), each on a drawn preset. Every
architecture's own draw (``experiments.arch_samplers``: its fields and ranges) gives one
seeded config, its own test on one preset (every other architecture under the full
fusion plan). The 300-config sweep over all of them is ``experiments/bench_configs.py``.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from experiments.arch_samplers import SAMPLERS
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


@settings(max_examples=3, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data())
def test_random_configs_match_transformers(data: st.DataObject) -> None:
    hf = sample_config(DataPicker(data))
    hw = data.draw(st.sampled_from(["hbm-pim", "aim-gddr6"]))
    out = check(hf, hw, steps=6, seed=1)
    assert out.status in ("pass", "refused"), (hw, out.message, hf)


# Each architecture's own draw, one config each (a seed of its own), alternating in
# name order between unfused on hbm-pim and the full fusion plan on aim-gddr6; each a
# separate test, so a parallel run spreads them over the workers.
SWEEP_SEED = 7
DRAWS = [(arch, j % 2) for j, arch in enumerate(sorted(SAMPLERS))]


@pytest.mark.parametrize("arch, i", DRAWS, ids=[f"{a}-{i}" for a, i in DRAWS])
def test_every_architecture_draw_matches_transformers(arch: str, i: int) -> None:
    hf = SAMPLERS[arch](RngPicker(SWEEP_SEED * 100_003 + 17 * i + len(arch)))
    fusion = dict(FULL_FUSION) if i else None
    hw = ("hbm-pim", "aim-gddr6")[i]
    out = check(hf, hw, steps=3, seed=i, fusion=fusion)
    assert out.status in ("pass", "refused"), (hw, out.message, hf, fusion)
