"""Model configuration: the shapes and numerics of a dense decoder.

:class:`ModelConfig` is autosched's summary of a Hugging Face config (``hf_config`` reads
one, with the architecture's row of ``readers``): immutable, hashable, validated on
construction. The config it was read from is kept inside it (``hf``, canonical JSON), so
the ``transformers`` module built for capture (``module``) is the one the user's config
describes; a config made from the summary alone (the built-ins) is a Llama-family one.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

from autosched.ir.errors import ModelError

from .readers import READERS

__all__ = ["LIMITS", "MODEL_TYPES", "ModelConfig", "ModelError", "NORMS"]

MODEL_TYPES = tuple(READERS)
SUMMARY_TYPES = ("llama", "mistral", "qwen2")  # those a config without ``hf`` can describe
NORMS = ("rms", "layer")  # the normalisation of the model: RMSNorm or LayerNorm
# what a real device could hold: beyond these a size is a typo, not a model
LIMITS = {"hidden": 1 << 17, "intermediate": 1 << 20, "layers": 1 << 10, "heads": 1 << 10,
          "kv_heads": 1 << 10, "head_dim": 1 << 10, "vocab": 1 << 22, "max_positions": 1 << 24}


def fail(name: str, why: str) -> ModelError:
    """The error for a config named ``name``: ``model config 'name': why``."""
    return ModelError(f"model config {name!r}: {why}")


@dataclass(frozen=True)
class ModelConfig:
    """Shapes and numerics of one decoder; immutable, validated on construction.

    ``rope_scaling``: the RoPE parameters besides ``rope_theta`` as sorted (key, value)
    pairs (``()`` for plain RoPE), ``rope_type`` among them, as ``transformers`` spells
    them. ``sliding_window`` (0: none) limits attention to the last that many positions
    in every layer not listed in ``full_layers``. ``arch``: the ``transformers`` class of
    the module ("" for the family's causal-LM class). ``hf``: the Hugging Face config the
    summary was read from, as canonical JSON ("" when made from the summary alone);
    ``layer_kinds``: per layer, what else sets it apart (see ``readers.layer_kinds``; ()
    when all layers are alike).
    """

    model_type: str
    hidden: int
    intermediate: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    rms_eps: float = 1e-5
    rope_theta: float = 10000.0
    max_positions: int = 2048
    tie_embeddings: bool = False
    attention_bias: bool = False
    dtype: str = "fp16"
    name: str = ""
    norm: str = "rms"  # rms (RMSNorm: the Llama family) | layer (LayerNorm); eps: rms_eps
    mlp_bias: bool = False
    hidden_act: str = "silu"
    rope_scaling: tuple[tuple[str, Any], ...] = ()
    sliding_window: int = 0
    full_layers: tuple[int, ...] = ()
    arch: str = ""
    hf: str = ""
    layer_kinds: tuple[str, ...] = ()
    quant: str = ""  # weight format of the quantized linears ("" none): sim.formats names
    quant_ignore: tuple[str, ...] = ()  # modules left in float (names or "re:" patterns)
    routing: tuple[tuple[float, ...], ...] = ()  # expert probabilities: see route()

    def __post_init__(self) -> None:
        n = self.name or self.model_type
        types = MODEL_TYPES if self.hf else SUMMARY_TYPES
        if self.model_type not in types:
            raise fail(n, f"model_type {self.model_type!r} is not supported; use one of "
                          f"{', '.join(types)}")
        for f, top in LIMITS.items():
            v = getattr(self, f)
            if isinstance(v, bool) or not isinstance(v, int) or not 0 < v <= top:
                raise fail(n, f"{f} must be an integer in [1, {top}], got {v!r}")
        if self.heads % self.kv_heads:
            raise fail(n, f"heads ({self.heads}) must be a multiple of kv_heads "
                          f"({self.kv_heads}) for grouped-query attention")
        if self.head_dim % 2:
            raise fail(n, f"head_dim ({self.head_dim}) must be even for rotary embedding")
        if not (self.rms_eps > 0 and self.rope_theta > 0):
            raise fail(n, "rms_eps and rope_theta must be positive")
        if self.dtype not in ("fp16", "bf16"):
            raise fail(n, f"dtype {self.dtype!r} is not supported; use fp16 or bf16")
        if self.norm not in NORMS:
            raise fail(n, f"norm {self.norm!r} is not supported; use one of {', '.join(NORMS)}")
        if not isinstance(self.hidden_act, str) or not self.hidden_act:
            raise fail(n, f"hidden_act must be an activation name, got {self.hidden_act!r}")
        if not isinstance(self.sliding_window, int) or self.sliding_window < 0:
            raise fail(n, f"sliding_window must be a non-negative integer, got "
                          f"{self.sliding_window!r}")
        if not isinstance(self.hf, str):
            raise fail(n, "hf must be the JSON text of a Hugging Face config")
        if self.quant:
            from sim.errors import AutoschedError
            from sim.formats import weight_format

            try:
                ok = weight_format(self.quant).quantized
            except AutoschedError:
                ok = False
            if not ok:
                raise fail(n, f"quant {self.quant!r} is not an integer weight format "
                              "(w8, w4g128, w4g64a...)")
        if len(self.routing) not in (0, 1, self.layers) or not all(
                isinstance(p, float) and 0 <= p <= 1 for r in self.routing for p in r):
            raise fail(n, f"routing must hold one row of expert probabilities, or one per "
                          f"layer ({self.layers}), each in [0, 1]")
        if self.layer_kinds and len(self.layer_kinds) != self.layers:
            raise fail(n, f"layer_kinds lists {len(self.layer_kinds)} layers, not {self.layers}")
        if self.hf:  # the rest holds for configs made from the summary alone
            return
        fixed = {"qwen2": ("attention_bias", True), "mistral": ("attention_bias", False)}
        if self.model_type in fixed and getattr(self, fixed[self.model_type][0]) != \
                fixed[self.model_type][1]:
            raise fail(n, f"{self.model_type} models have attention_bias="
                          f"{fixed[self.model_type][1]}")
        if self.mlp_bias and self.model_type != "llama":
            raise fail(n, "mlp_bias exists only in llama models")
        if any(not 0 <= i < self.layers for i in self.full_layers):
            raise fail(n, f"full_layers {self.full_layers} name layers outside "
                          f"0..{self.layers - 1}")

    @property
    def q_dim(self) -> int:
        return self.heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.head_dim

    @property
    def rope_type(self) -> str:
        return str(dict(self.rope_scaling).get("rope_type", "default"))

    def window(self, layer: int) -> int:
        """Positions layer ``layer`` attends to (0: all of them)."""
        return 0 if layer in self.full_layers else self.sliding_window

    def layer_kind(self, layer: int) -> str:
        """What sets layer ``layer`` apart besides its window ("" when nothing does)."""
        return self.layer_kinds[layer] if self.layer_kinds else ""

    @property
    def experts(self) -> int:
        """Routed experts per sparse layer (0 for a dense model)."""
        import json

        hf = json.loads(self.hf) if self.hf else {}
        return int(hf.get("num_local_experts") or hf.get("num_experts") or 0)

    def route(self, layer: int) -> tuple[float, ...]:
        """Layer ``layer``'s expert probabilities, a routing measured from prompts (``()``:
        uniform, the default); one row of ``routing`` holds for every layer."""
        if len(self.routing) == 1:
            return self.routing[0]
        return self.routing[layer] if self.routing else ()

    def subset(self, layers: tuple[int, ...]) -> ModelConfig:
        """This model with only the decoder layers ``layers`` (in that order), each keeping
        its window and kind: what capture builds to see a few layers of each kind."""
        from .hf_config import subset

        return subset(self, tuple(layers))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ModelConfig:
        """Inverse of :meth:`to_dict` (our own field names, not Hugging Face's)."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ModelError(f"unknown model config field(s) {', '.join(unknown)}")
        d = dict(d)
        d["rope_scaling"] = tuple((k, tuple(v) if isinstance(v, list) else v)
                                  for k, v in d.get("rope_scaling", ()))
        d["full_layers"] = tuple(d.get("full_layers", ()))
        d["layer_kinds"] = tuple(d.get("layer_kinds", ()))
        d["quant_ignore"] = tuple(d.get("quant_ignore", ()))
        d["routing"] = tuple(tuple(float(p) for p in r) for r in d.get("routing", ()))
        return cls(**d)

    @classmethod
    def from_hf(cls, src: Any, *, name: str | None = None,
                dtype: str | None = None) -> ModelConfig:
        """Parse a Hugging Face ``config.json`` (file, directory holding one, dict, or a
        ``transformers`` config object); see :func:`autosched.frontend.hf_config.parse`."""
        from .hf_config import parse

        return parse(src, name=name, dtype=dtype)
