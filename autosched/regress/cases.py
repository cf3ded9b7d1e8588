"""The cases of the regression suite: what is measured, as small frozen values.

A case names everything that changes its figures, and its ``id`` is the stable key under
which the baseline and the history keep them:

* :class:`ModelCase`: one step of a model (built-in, or one of :data:`SUITE_MODELS`) on a
  preset: phase, batch, context, the schedules (``default``: each family's hand-written
  default; ``tuned``: the checked-in tuned-schedule export, :mod:`.tuned`; ``library``:
  the shipped library kernels wherever the library has one) and the fusion plan
  (``none`` or ``full``); ``baseline`` adds the plain-memory program's latency;
  ``grow``: a program that does not fit the preset is timed on the same device with as
  many rows per bank as it needs (a power of two; every timing unchanged), as the
  hand-off does for the library kernels' sparse layouts (not part of the ``id``: it
  changes only a case that could not be measured otherwise; the result's ``info`` says
  the rows per bank used); ``quantize`` (``w8``, ``w4g128``, ...): every linear but the LM
  head quantized to that weight format on the fly, as ``--quantize`` does.
* :class:`KernelCase`: the library GEMV of ``sim/kernels`` alone (what a hardware team
  ships), with its plain-memory baseline.
* :class:`TuneCase`: a fixed search (one workload of a model, a budget, a seed) whose
  only figure is its wall time; the schedule it finds is not compared, the suite
  measures the compiler and simulator, not the luck of a search.
"""

from __future__ import annotations

from dataclasses import dataclass

from autosched.frontend import ModelConfig, get_model_config
from sim.errors import AutoschedError, check

__all__ = ["FUSIONS", "SCHEDULES", "SUITE_MODELS", "Case", "KernelCase", "ModelCase",
           "TuneCase", "case_kind", "resolve_model"]

SCHEDULES = ("default", "tuned", "library")
FUSIONS = ("none", "full")

# Odd shapes in a small config: GQA 5:1, a prime intermediate size and vocabulary,
# attention biases and tied embeddings (qwen2), so the suite covers padding, biases and
# the layout glue that llama-tiny never needs.
SUITE_MODELS: dict[str, ModelConfig] = {
    "odd-qwen2": ModelConfig("qwen2", hidden=160, intermediate=347, layers=2, heads=5,
                             kv_heads=1, head_dim=32, vocab=997, max_positions=256,
                             tie_embeddings=True, attention_bias=True, name="odd-qwen2"),
}


def resolve_model(name: str) -> ModelConfig:
    """A suite model by name, else a built-in or a config path (``get_model_config``)."""
    return SUITE_MODELS.get(name) or get_model_config(name)


@dataclass(frozen=True)
class ModelCase:
    """One model step compiled and simulated whole."""

    model: str
    hw: str
    phase: str = "decode"
    batch: int = 1
    context: int = 128
    schedules: str = "default"
    fusion: str = "none"
    baseline: bool = False
    grow: bool = False
    quantize: str | None = None

    def __post_init__(self) -> None:
        check(self.phase in ("decode", "prefill"), f"phase {self.phase!r}: use decode or prefill")
        check(self.schedules in SCHEDULES,
              f"schedules {self.schedules!r}: use one of {', '.join(SCHEDULES)}")
        check(self.fusion in FUSIONS, f"fusion {self.fusion!r}: use one of {', '.join(FUSIONS)}")
        check(self.quantize is None or (isinstance(self.quantize, str) and self.quantize),
              f"quantize must be a weight format such as w8 or w4g128, got {self.quantize!r}")
        for name in ("batch", "context"):
            v = getattr(self, name)
            check(isinstance(v, int) and v > 0, f"{name} must be a positive int, got {v!r}")

    @property
    def id(self) -> str:
        fused = "+fused" if self.fusion == "full" else ""
        model = f"{self.model}:{self.quantize}" if self.quantize else self.model
        return (f"{model}/{self.hw}/{self.phase}-b{self.batch}-c{self.context}/"
                f"{self.schedules}{fused}")

    def config(self) -> ModelConfig:
        """The model of the case, quantized when ``quantize`` says so."""
        cfg = resolve_model(self.model)
        if self.quantize:
            from autosched.frontend.quantized import with_quantization

            cfg = with_quantization(cfg, self.quantize)
        return cfg


@dataclass(frozen=True)
class KernelCase:
    """The library GEMV ``y[batch, n] = x[batch, k] W^T`` with its default options."""

    hw: str
    n: int
    k: int
    batch: int = 1

    @property
    def id(self) -> str:
        return f"gemv-library/{self.hw}/{self.n}x{self.k}-b{self.batch}"


@dataclass(frozen=True)
class TuneCase:
    """``trials`` new measurements on the workload of ``role`` in one model step."""

    model: str
    hw: str
    role: str
    trials: int = 16
    cost_model: str = "none"
    seed: int = 0

    @property
    def id(self) -> str:
        return f"tune/{self.model}/{self.hw}/{self.role}-t{self.trials}-{self.cost_model}"


Case = ModelCase | KernelCase | TuneCase


def case_kind(case: Case) -> str:
    """``model``, ``kernel`` or ``tune``."""
    if isinstance(case, ModelCase):
        return "model"
    if isinstance(case, KernelCase):
        return "kernel"
    if isinstance(case, TuneCase):
        return "tune"
    raise AutoschedError(f"not a regression case: {case!r}")
