"""The dense architectures' patterns: derived parameters, and every tiny architecture
captured with no op left on the host (``experiments.archs``)."""

from __future__ import annotations

import numpy as np
import pytest

from autosched.ir.derived import derived, parse
from autosched.pipeline import model_graph
from experiments.archs import ARCHS, tiny_checkpoint


def test_derived_parameters_round_trip_and_compose() -> None:
    w = np.arange(24, dtype=np.float32).reshape(12, 2)
    name = derived("qkv.weight", rows=(6, 2, 4))  # rows 2:4 of each block of 6
    assert parse(name).rows == (6, 2, 4)
    np.testing.assert_array_equal(parse(name).apply(w, 1.0), w[[2, 3, 8, 9]])
    scaled = derived(name, scale=0.5)
    np.testing.assert_array_equal(parse(scaled).apply(w, parse(scaled).scale),
                                  0.5 * w[[2, 3, 8, 9]])
    gemma = derived("norm.weight", offset=1.0)
    assert parse(derived(gemma, scale=2.0)).offset == 2.0  # 2 (w + 1) = 2w + 2
    buf = derived("embed.weight", scale="buffer:embed.embed_scale")
    assert parse(buf).scale == "buffer:embed.embed_scale"
    with pytest.raises(ValueError):
        derived(name, rows=(2, 0, 1))


# an architecture per pattern: GELU, tanh-GELU spelled out, norm scale 1 + w, embedding
# and linear multipliers, soft-capping, per-head LayerNorm, partial and interleaved
# rotary, packed qkv / gate_up (per head in GPT-NeoX), Falcon's in-place parallel sum
_PATTERNS = ("gemma2", "phi", "granite", "cohere", "glm", "phi3", "gpt_neox", "falcon")


@pytest.mark.parametrize("arch", _PATTERNS)
def test_no_op_is_left_on_the_host(tmp_path, arch: str) -> None:
    """Activations, scalars, norm scales, rotary variants and packed weights are claimed."""
    assert arch in ARCHS
    _, g = model_graph(str(tiny_checkpoint(arch, tmp_path / arch)), context=8)
    assert not [n.name for n in g.nodes if n.workload.op == "extern"]


@pytest.mark.parametrize("arch", ["gemma2", "granite", "gpt_neox", "glm", "stablelm"])
def test_fused_epilogues_match_generate(tmp_path, arch: str) -> None:
    """Gated tanh-GELU and post-norms in the residual epilogue (Gemma 2), multipliers
    folded into the weights (Granite), packed per-head qkv merged back, its partial
    rotary and fc1's GELU after its bias (GPT-NeoX), partial rotary of neighbouring pairs
    (GLM), the residual's LayerNorm appended by the linear before it (StableLM), under
    the full fusion plan."""
    from autosched.api import run_check
    from search_spaces.fusion import FULL_FUSION

    rep = run_check(str(tiny_checkpoint(arch, tmp_path / arch)), "aim-gddr6", steps=2,
                    fusion=dict(FULL_FUSION))
    assert rep.passed and rep.tokens_match


@pytest.mark.parametrize("arch", ["phi", "stablelm", "gpt_neox", "glm"])
def test_partial_and_interleaved_rotary_join_the_qkv_epilogue(tmp_path, arch: str) -> None:
    """The rope of a partial rotary (and GLM's neighbouring pairs) leaves the graph for the
    merged projection's epilogue, with the columns it turns and the model's own tables."""
    from search_spaces.fusion import FULL_FUSION

    folder = str(tiny_checkpoint(arch, tmp_path / arch))
    _, unfused = model_graph(folder, context=8)
    _, fused = model_graph(folder, context=8, fusion=dict(FULL_FUSION))
    rope = next(n.workload for n in unfused if n.workload.op == "rope")
    assert not [n for n in fused if n.workload.op == "rope"]
    qkv = next(n for n in fused if n.role == "qkv_proj").workload
    assert qkv.attr("epilogue") == "rope"
    assert (qkv.attr("rope_rot"), qkv.attr("rope_pairs"), qkv.attr("rope_tables")) == (
        rope.attr("rot"), rope.attr("pairs"), rope.attr("tables"))


@pytest.mark.parametrize("arch", ["stablelm", "starcoder2", "olmo"])
def test_a_layernorm_after_a_residual_joins_its_epilogue(tmp_path, arch: str) -> None:
    """Sequential pre-LayerNorm blocks keep no LayerNorm node: the first block's is
    appended by the embedding, every later one by the linear whose residual sum it
    normalises (``add_layernorm``)."""
    from search_spaces.fusion import FULL_FUSION

    folder = str(tiny_checkpoint(arch, tmp_path / arch))
    _, fused = model_graph(folder, context=8, fusion=dict(FULL_FUSION))
    assert not [n.name for n in fused if n.workload.op == "layernorm"]
    assert fused.by_role("embed")[0].workload.attr("epilogue") == "layernorm"
    assert {n.workload.attr("epilogue") for n in fused if n.role in ("o_proj", "ffn_down")} \
        == {"add_layernorm"}


@pytest.mark.parametrize("arch", ["phi", "gpt_neox", "falcon"])
def test_a_parallel_blocks_residual_is_added_by_its_linears(tmp_path, arch: str) -> None:
    """``attn + mlp + x``: the MLP's last linear adds ``x``, ``o_proj`` adds that, and no
    add is left on its own; one shared LayerNorm (Phi, Falcon) joins ``o_proj``'s
    epilogue, GPT-NeoX's two stay nodes (an epilogue appends one norm)."""
    from search_spaces.fusion import FULL_FUSION

    folder = str(tiny_checkpoint(arch, tmp_path / arch))
    _, fused = model_graph(folder, context=8, fusion=dict(FULL_FUSION))
    assert not [n.name for n in fused if n.workload.op == "elementwise"
                and n.workload.attr("fn") == "add"]
    assert {n.workload.attr("epilogue") for n in fused if n.role == "ffn_down"} == {"add"}
    last = {n.workload.attr("epilogue") for n in fused if n.role == "o_proj"}
    assert last == ({"add", "add_layernorm"} if arch == "gpt_neox" else {"add_layernorm"})
