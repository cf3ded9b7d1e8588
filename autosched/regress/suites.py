"""The versioned suites: ``quick`` (CI, under a minute) and ``full`` (every built-in model
one device holds, on every one-device preset, minutes).

Changing what a suite contains bumps its ``version`` (v2: the library-kernel cases; v3
of ``full``: the library programs of the 7B-class models and their prefill on hbm-pim;
v4: every built-in model on the multi-device systems). The baseline records the version
it was written for. ``full`` lists its one-device models and presets
(:data:`FULL_MODELS`, :data:`FULL_PRESETS`) and its systems (:data:`SYSTEM_PRESETS`:
decode of every built-in model, the 13B and 70B ones included, at batch 1; batches and
prefill on systems are ``experiments/bench_serving.py``'s).

The library-kernel program of a 7B-class model does not fit either preset (the library
GEMV's layout needs about twice the banks the presets have), so its cases are timed on
the preset grown to the rows per bank that layout needs (``ModelCase.grow``; the timing
is the preset's).
"""

from __future__ import annotations

from dataclasses import dataclass

from autosched.frontend import list_models
from sim.errors import AutoschedError
from sim.hwio import list_device_presets

from .cases import Case, KernelCase, ModelCase, TuneCase, resolve_model

__all__ = ["SUITES", "Suite", "decode_cases", "get_suite", "readme_model_cases"]

QUICK_MODELS = ("llama-tiny", "odd-qwen2")
QUICK_PRESETS = ("hbm-pim", "aim-gddr6")
# the full suite: every built-in model that one device holds, on every one-device preset
# (larger models and the multi-device systems: experiments/bench_serving.py)
FULL_MODELS = ("llama-tiny", "llama2-7b", "llama3-8b")
FULL_PRESETS = QUICK_PRESETS
# every built-in model, decode on each multi-device system (partition searched)
SYSTEM_PRESETS = ("hbm-pim-x16", "aim-gddr6-x16")
GEMV_SHAPES = ((4096, 4096), (4096, 11008), (11008, 4096), (4096, 14336), (4096, 32000))
GEMV_BATCHES = (1, 2, 4)
README_CONTEXT = 1024


@dataclass(frozen=True)
class Suite:
    """A named, versioned list of cases and how many times wall-clock figures are taken."""

    name: str
    version: int
    cases: tuple[Case, ...]
    repeats: int = 3


def decode_cases(model: str, hw: str, context: int, *, baseline: bool = False) -> list[Case]:
    """Decode at batch 1: default schedules, the tuned export, the tuned fused plan, and the
    library kernels (the hand-kernel baseline ``autosched kernels`` compares with; on a
    device grown to the rows their layout needs where the preset cannot hold it)."""
    cases: list[Case] = [
        ModelCase(model, hw, context=context, baseline=baseline),
        ModelCase(model, hw, context=context, schedules="tuned"),
        ModelCase(model, hw, context=context, schedules="tuned", fusion="full"),
        ModelCase(model, hw, context=context, schedules="library", grow=True)]
    return cases


def readme_context(model: str) -> int:
    """The README's decode context: 1024, or the model's maximum when smaller."""
    return min(README_CONTEXT, resolve_model(model).max_positions)


def readme_model_cases(models: tuple[str, ...] | None = None,
                       presets: tuple[str, ...] | None = None) -> list[ModelCase]:
    """The cases behind the README's whole-model table (``experiments/bench_models.py``):
    by default the built-in models one device holds (``FULL_MODELS``) on every one-device
    preset."""
    return [ModelCase(m, hw, context=readme_context(m), baseline=True)
            for m in models or FULL_MODELS
            for hw in presets or tuple(list_device_presets())]


def _quick() -> Suite:
    cases: list[Case] = []
    for model in QUICK_MODELS:
        for hw in QUICK_PRESETS:
            cases += decode_cases(model, hw, 128)
            cases.append(ModelCase(model, hw, phase="prefill", context=16))
    cases += [KernelCase(hw, 4096, 4096) for hw in QUICK_PRESETS]
    cases.append(TuneCase("llama-tiny", "hbm-pim", "ffn_down", trials=16))
    return Suite("quick", 2, tuple(cases))


def _full() -> Suite:
    cases: list[Case] = []
    for model in (*FULL_MODELS, *(m for m in QUICK_MODELS if m not in FULL_MODELS)):
        for hw in FULL_PRESETS:
            ctx = readme_context(model)
            cases += decode_cases(model, hw, ctx, baseline=True)
            cases.append(ModelCase(model, hw, batch=4, context=256))
            cases.append(ModelCase(model, hw, phase="prefill", context=16))
    cases += [ModelCase(model, hw, context=readme_context(model))
              for model in list_models() for hw in SYSTEM_PRESETS]
    cases += [KernelCase(hw, n, k, b) for hw in FULL_PRESETS for n, k in GEMV_SHAPES
              for b in GEMV_BATCHES]
    cases += [TuneCase("llama2-7b", hw, "ffn_down", trials=32, cost_model="xgb")
              for hw in FULL_PRESETS]
    return Suite("full", 4, tuple(cases), repeats=3)


SUITES = {"quick": _quick, "full": _full}


def get_suite(name: str) -> Suite:
    """The suite called ``name``; unknown names list the known ones."""
    make = SUITES.get(name)
    if make is None:
        raise AutoschedError(f"unknown suite {name!r}: use one of {', '.join(SUITES)}")
    return make()
