"""The prologue, epilogue and bias attributes of a gemv/gemm workload, checked."""

from __future__ import annotations

from search_spaces import Workload
from sim.activations import ACTIVATIONS
from sim.errors import check

__all__ = ["EPILOGUES", "PROLOGUES", "RESIDUAL_EPILOGUES", "gemv_attrs", "has_qk_norm",
           "has_stage"]

# workload attr ``prologue`` -> the constants [k] of the norm the host applies to ``x``
# before the GEMV starts (attr ``eps``); the host op is named by the prologue
PROLOGUES: dict[str, tuple[str, ...]] = {"": (), "rmsnorm": ("norm_w",),
                                         "layernorm": ("norm_w", "norm_b")}

# workload attr ``epilogue`` -> the stages of ``sim.host_epilogue.EPILOGUES`` it runs (after a
# ``bias`` stage when attr ``bias=1``): ``add_rmsnorm`` adds the residual ``r`` and also
# writes the sum's RMS norm (attr ``out_eps``, constant ``out_norm_w`` [n]) beside it,
# output [m, 2n] = residual | normalised; ``add_layernorm`` the same with a LayerNorm
# (constants ``out_norm_w``, ``out_norm_b`` [n]); ``rope`` rotates the first attr ``rope_heads``
# heads of attr ``rope_d`` columns (constants ``cos``, ``sin`` [m, r]): the first
# ``r`` = attr ``rope_rot`` (default ``rope_d``: partial rotary) of each head, pairs the
# halves of those or neighbours (attr ``rope_pairs="interleaved"``); ``argmax``
# appends each row's argmax, output [m, n + 1] = logits | next token; ``norm_add``
# (``norm_add_rmsnorm``) first normalises the output by a post-norm (attr ``post_eps``,
# constant ``post_norm_w`` [n]: Gemma 2/3, OLMo 2), then as ``add``; an activation
# (``relu``, ``gelu_tanh``, ``gelu_erf``, ``silu``) applies to every output, after the bias
# (an ``fc1``); ``{act}_mul`` gates, output [m, n/2] = act(gate) * up; ``qknorm_rope``
# first RMS-normalises each of the ``rope_heads`` heads, the first attr ``qk_heads`` (q's)
# with constant ``q_norm_w`` [rope_d] and the rest (k's) with ``k_norm_w`` (attr
# ``qk_eps``: Qwen3, Gemma 3, OLMo 2's per-head form), then as ``rope``; ``qklnorm_rope``
# LayerNorms them instead, without shift, and with attr ``qk_per_head`` 1 the constants
# hold a scale row per head (``q_norm_w`` [qk_heads * rope_d], ``k_norm_w`` the rest's:
# Cohere); ``softcap`` caps
# the logits, ``cap * tanh(z / cap)`` (attr ``cap``: Gemma 2's final soft-cap),
# ``softcap_argmax`` then appends each row's argmax
EPILOGUES: dict[str, tuple[str, ...]] = {
    "": (), "add": ("add",), "add_rmsnorm": ("add", "rmsnorm_cat"), "rope": ("rope",),
    "add_layernorm": ("add", "layernorm_cat"),
    "qknorm_rope": ("qknorm", "rope"), "qklnorm_rope": ("qklnorm", "rope"),
    "norm_add": ("rmsnorm", "add"), "norm_add_rmsnorm": ("rmsnorm", "add", "rmsnorm_cat"),
    "argmax": ("argmax_cat",), "softcap": ("softcap",),
    "softcap_argmax": ("softcap", "argmax_cat"), **{a: (a,) for a in ACTIVATIONS},
    **{f"{a}_mul": (f"{a}_mul",) for a in ACTIVATIONS}}


# the epilogues that add the residual input ``r``
RESIDUAL_EPILOGUES = ("add", "add_rmsnorm", "norm_add", "norm_add_rmsnorm", "add_layernorm")


def has_stage(epi: object, stage: str) -> bool:
    """Whether epilogue ``epi`` (a workload's attr, possibly unset) runs host stage ``stage``."""
    return stage in EPILOGUES.get(str(epi or ""), ())


def has_qk_norm(epi: object) -> bool:
    """Whether epilogue ``epi`` normalises q's and k's heads (``qknorm`` or ``qklnorm``)."""
    return has_stage(epi, "qknorm") or has_stage(epi, "qklnorm")


def gemv_attrs(w: Workload) -> tuple[str, str, bool]:
    """(prologue: a key of :data:`PROLOGUES`, epilogue: a key of :data:`EPILOGUES`, bias) of
    ``w``, checked."""
    pro, epi, bias = w.attr("prologue", ""), w.attr("epilogue", ""), int(w.attr("bias", 0))
    check(pro in PROLOGUES, f"gemv prologue {pro!r} unknown: use "
          f"{', '.join(p for p in PROLOGUES if p)} or none")
    check(epi in EPILOGUES, f"gemv epilogue {epi!r} unknown: use "
          f"{', '.join(e for e in EPILOGUES if e)} or none")
    check(bias in (0, 1), f"gemv attr bias must be 0 or 1, got {bias}")
    check(not epi.endswith("_mul") or w.dims["n"] % 2 == 0,
          f"epilogue {epi} needs an even n")
    if has_stage(epi, "rope"):
        heads, d = int(w.attr("rope_heads", 0)), int(w.attr("rope_d", 0))
        check(heads > 0 and d > 0 and d % 2 == 0 and heads * d <= w.dims["n"],
              f"epilogue {epi} needs attrs rope_heads and an even rope_d with rope_heads * "
              f"rope_d <= n={w.dims['n']}, got {heads} and {d}")
        rot, pairs = int(w.attr("rope_rot", d)), w.attr("rope_pairs", "half")
        check(0 < rot <= d and rot % 2 == 0 and pairs in ("half", "interleaved"),
              f"epilogue {epi} rotates an even rope_rot <= rope_d={d} columns of each head "
              f"in half or interleaved pairs, got {rot} and {pairs!r}")
    if has_stage(epi, "softcap"):
        cap = float(w.attr("cap", 0))
        check(cap > 0, f"epilogue {epi} needs attr cap > 0, got {cap}")
    if has_qk_norm(epi):
        qh = int(w.attr("qk_heads", 0))
        check(0 < qh < int(w.attr("rope_heads", 0)),
              f"epilogue {epi} needs attr qk_heads between 0 and rope_heads, got {qh}")
        check(int(w.attr("qk_per_head", 0)) in (0, 1),
              f"gemv attr qk_per_head must be 0 or 1, got {w.attr('qk_per_head')}")
    return str(pro), epi, bool(bias)
