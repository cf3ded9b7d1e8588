"""The graph-level fusion plan: which neighbouring operators of a decoder become one.

A plan is a point of :func:`fusion_space` (booleans); ``autosched.fusion.apply_fusion``
turns an operator graph and a plan into the fused graph. Decisions:

* ``norm_into_linear``: an RMSNorm or LayerNorm (one scale for the whole row) whose
  consumers are all linear layers disappears; each consumer gets attr ``prologue`` (the
  norm's op, and ``eps``) and reads the norm's input.
* ``merge_qkv``: q, k, v projections become one linear ``qkv_proj``, n = (h + 2 kvh) d,
  output q | k | v per row.
* ``rope_epilogue`` (only with ``merge_qkv``): ``qkv_proj`` gets attr ``epilogue="rope"``
  (``rope_heads``, ``rope_d``): the host op finishing it rotates q | k, and the rope node
  disappears.
* ``merge_gate_up``: gate and up projections become one linear ``gate_up``, n = 2 I,
  output gate | up per row.
* ``silu_mul_epilogue`` (only with ``merge_gate_up``): ``gate_up`` gets attr
  ``epilogue="silu_mul"`` (output [m, I]) and the SiLU and multiply nodes disappear.
* ``residual_epilogue``: o_proj and down_proj get attr ``epilogue="add"`` and absorb the
  residual additions that follow them.
* ``norm_epilogue`` (only with ``residual_epilogue``): such a linear whose sum feeds an
  RMSNorm read only by linears' ``x`` (the next block's norm) gets attr
  ``epilogue="add_rmsnorm"``: one host op writes the residual and its normalised copy
  side by side, and the norm node disappears (before ``norm_into_linear`` sees it). The
  embedding, which starts the residual stream, does the same for the first block's norm
  (attr ``epilogue="rmsnorm"`` or ``"layernorm"``: the looked-up rows, then their norm).
* ``argmax_epilogue``: a linear read only by an argmax (the LM head and the next token)
  gets attr ``epilogue="argmax"``: the host op finishing the logits appends each row's
  argmax as one more column, and the argmax node disappears. A final soft-cap of the
  logits between them (Gemma 2) joins first (``softcap``, ``softcap_argmax``: attr
  ``cap``).

Plans recorded before a decision existed read it as off (:func:`upgrade_plan`).
"""

from __future__ import annotations

from search_spaces.domains import Categorical
from search_spaces.params import Cond, Param
from search_spaces.space import Space

__all__ = ["FULL_FUSION", "NO_FUSION", "VERSION", "fusion_default", "fusion_space",
           "upgrade_plan"]

VERSION = 3
_BOOL = Categorical((False, True))
# decisions added after version 2, and the value a plan recorded before them means
_ADDED: dict[str, bool] = {"argmax_epilogue": False}

NO_FUSION: dict[str, bool] = {"norm_into_linear": False, "merge_qkv": False,
                              "merge_gate_up": False, "residual_epilogue": False,
                              "argmax_epilogue": False}
FULL_FUSION: dict[str, bool] = {"norm_into_linear": True, "merge_qkv": True,
                                "rope_epilogue": True, "merge_gate_up": True,
                                "silu_mul_epilogue": True, "residual_epilogue": True,
                                "norm_epilogue": True, "argmax_epilogue": True}


def fusion_space() -> Space:
    """Eight booleans (``rope_epilogue`` exists only when ``merge_qkv`` is True,
    ``silu_mul_epilogue`` only with ``merge_gate_up``, ``norm_epilogue`` only with
    ``residual_epilogue``): 108 plans."""
    return Space("fusion", VERSION, (
        Param("norm_into_linear", _BOOL),
        Param("merge_qkv", _BOOL),
        Param("rope_epilogue", _BOOL, Cond("merge_qkv", True)),
        Param("merge_gate_up", _BOOL),
        Param("silu_mul_epilogue", _BOOL, Cond("merge_gate_up", True)),
        Param("residual_epilogue", _BOOL),
        Param("norm_epilogue", _BOOL, Cond("residual_epilogue", True)),
        Param("argmax_epilogue", _BOOL),
    ))


def upgrade_plan(plan: dict) -> dict:
    """``plan`` with the decisions added since it was recorded (absent from it) off."""
    return {**_ADDED, **plan}


def fusion_default() -> dict[str, bool]:
    """Every fusion on: fewer operators, fewer host dispatches, wider GEMVs (by hand)."""
    return dict(FULL_FUSION)
