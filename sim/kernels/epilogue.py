"""The epilogue of a GEMV: host stages fused into the one host op that finishes it.

A GEMV's result is finished by one host op (the PIM partial sums reduced and stripped,
or the host multiply); :class:`Epilogue` lists the stages of
:data:`sim.host_epilogue.EPILOGUES` that op also applies, in order, and names the inputs they
read: ``bias`` ``b`` [n]; ``add`` ``r`` [batch, n]; ``silu_mul`` none (output halved);
``rmsnorm_cat`` ``out_norm_w`` [n] with epsilon ``eps`` (output doubled: the value, then
its RMS norm); ``layernorm_cat`` ``out_norm_w``, ``out_norm_b`` [n] with ``eps`` (the
same with a LayerNorm); ``rope`` ``cos``, ``sin`` [batch, rope_rot], rotating the first
``rope_heads`` heads of ``rope_dim`` columns of each row (q | k of a merged projection):
the first ``rope_rot`` columns of each head (default all), rotate-half or neighbouring
pairs (``rope_pairs="interleaved"``);
``softcap`` none, with ``cap`` (``cap * tanh(x / cap)``);
``argmax_cat`` none (one more column: each row's argmax, the logits' next token);
``qknorm`` ``q_norm_w``, ``k_norm_w`` [rope_dim] with ``qk_eps``: per-head RMS norms of the
first ``qk_heads`` heads (q) and the next ``rope_heads - qk_heads`` (k), before ``rope``;
``qklnorm`` the same with LayerNorms without shift (Cohere); ``qk_per_head``: the scales
hold a row per head (``q_norm_w`` [qk_heads * rope_dim], ``k_norm_w`` the others');
``rmsnorm`` ``post_norm_w`` [n] with ``post_eps`` (a post-norm, in place); an
activation (``relu``, ``gelu_tanh``, ``gelu_erf``, ``silu``: an ``fc1``'s) none, and its
gated form ``{act}_mul`` none (output halved, as ``silu_mul``).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..activations import ACTIVATIONS
from ..errors import AutoschedError
from ..host_epilogue import EPILOGUES, grown_width
from ..isa import BufRef, HostOp, aff
from ..program import Buffer

__all__ = ["NO_EPILOGUE", "Epilogue"]

_INPUTS = {"bias": ("b",), "add": ("r",), "rmsnorm_cat": ("out_norm_w",),
           "layernorm_cat": ("out_norm_w", "out_norm_b"),
           "rmsnorm": ("post_norm_w",),
           "rope": ("cos", "sin"), "argmax_cat": (), "softcap": (),
           "qknorm": ("q_norm_w", "k_norm_w"), "qklnorm": ("q_norm_w", "k_norm_w"),
           **{a: () for a in ACTIVATIONS}, **{f"{a}_mul": () for a in ACTIVATIONS}}


@dataclass(frozen=True)
class Epilogue:
    """Stages applied to a ``[batch, n]`` result, and their parameters."""

    stages: tuple[str, ...] = ()
    eps: float = 1e-5  # rmsnorm_cat, layernorm_cat
    rope_heads: int = 0  # rope: heads rotated, from column 0
    rope_dim: int = 0  # rope: head dim (cos/sin width)
    post_eps: float = 1e-5  # rmsnorm (a post-norm)
    qk_heads: int = 0  # qknorm: q's heads (the rest of rope_heads are k's)
    qk_eps: float = 1e-6  # qknorm
    rope_rot: int = 0  # rope: columns of each head rotated (0: all of rope_dim)
    rope_pairs: str = "half"  # rope: "half" (rotate-half) or "interleaved"
    cap: float = 0.0  # softcap
    qk_per_head: bool = False  # qknorm, qklnorm: a scale row per head

    def __post_init__(self) -> None:
        bad = [st for st in self.stages if st not in EPILOGUES]
        if bad:
            raise AutoschedError(f"epilogue stage {bad[0]!r} unknown "
                                 f"(known: {', '.join(EPILOGUES)})")
        if "rope" in self.stages and min(self.rope_heads, self.rope_dim) < 1:
            raise AutoschedError("a rope epilogue needs rope_heads and rope_dim")
        if "rope" in self.stages and (self.rope_pairs not in ("half", "interleaved") or
                                      not 0 <= self.rope_rot <= self.rope_dim or
                                      self.rope_rot % 2):
            raise AutoschedError("a rope epilogue rotates an even number of columns up to "
                                 "rope_dim, in half or interleaved pairs")
        if self.qk_norm and not 0 < self.qk_heads < self.rope_heads:
            raise AutoschedError(f"a {self.qk_norm} epilogue needs 0 < qk_heads < rope_heads")
        if "softcap" in self.stages and not self.cap > 0:
            raise AutoschedError(f"a softcap epilogue needs a cap > 0, got {self.cap}")

    def inputs(self) -> tuple[str, ...]:
        """The input buffers the stages read, in stage order."""
        return tuple(b for st in self.stages for b in _INPUTS[st])

    def shapes(self, batch: int, n: int) -> tuple[tuple[int, ...], ...]:
        """Shapes of :meth:`inputs`."""
        size = {"b": (n,), "out_norm_w": (n,), "out_norm_b": (n,), "post_norm_w": (n,),
                "r": (batch, n),
                "cos": (batch, self.rot), "sin": (batch, self.rot),
                "q_norm_w": (self.rope_dim,), "k_norm_w": (self.rope_dim,)}
        if self.qk_per_head:
            size["q_norm_w"] = (self.qk_heads * self.rope_dim,)
            size["k_norm_w"] = ((self.rope_heads - self.qk_heads) * self.rope_dim,)
        return tuple(size[b] for b in self.inputs())

    @property
    def qk_norm(self) -> str:
        """The per-head q/k norm stage (``qknorm`` or ``qklnorm``), or ""."""
        return next((st for st in self.stages if st in ("qknorm", "qklnorm")), "")

    @property
    def rot(self) -> int:
        """Columns of each head the rope stage rotates."""
        return self.rope_rot or self.rope_dim

    def out_shape(self, batch: int, n: int) -> tuple[int, int]:
        """The output's shape: ``[batch, n]``, halved by silu_mul, doubled by rmsnorm_cat
        and layernorm_cat, one column more with argmax_cat."""
        for st in self.stages:
            n = grown_width(st, n)
        return batch, n

    def attrs(self) -> tuple[tuple[str, float | int | str], ...]:
        """The host op attrs carrying the stages and their parameters."""
        if not self.stages:
            return ()
        out: tuple = (("epi", ",".join(self.stages)),)
        if "rmsnorm_cat" in self.stages or "layernorm_cat" in self.stages:
            out += (("eps", self.eps),)
        if "rope" in self.stages:
            out += (("rope_heads", self.rope_heads),)
            if self.rot != self.rope_dim:
                out += (("rope_d", self.rope_dim),)
            if self.rope_pairs != "half":
                out += (("pairs", self.rope_pairs),)
        if "rmsnorm" in self.stages:
            out += (("post_eps", self.post_eps),)
        if self.qk_norm:
            out += (("qk_heads", self.qk_heads), ("qk_eps", self.qk_eps))
            if self.qk_per_head:
                out += (("qk_per_head", 1),)
        if "softcap" in self.stages:
            out += (("cap", self.cap),)
        return out

    def op(self, kind: str, ins: tuple[BufRef, ...], batch: int, n: int,
           attrs: tuple = ()) -> tuple[HostOp, list[Buffer]]:
        """The host op ``kind`` over ``ins`` (and the stages' inputs) writing ``y``, with
        the buffers of the stages' inputs and of ``y``."""
        names, shapes = self.inputs(), self.shapes(batch, n)
        bufs = [Buffer(b, "fp32", _size(sh)) for b, sh in zip(names, shapes, strict=True)]
        refs = tuple(BufRef(b, aff(0), sh) for b, sh in zip(names, shapes, strict=True))
        out = self.out_shape(batch, n)
        bufs.append(Buffer("y", "fp32", out[0] * out[1]))
        return HostOp(kind, (BufRef("y", aff(0), out),), (*ins, *refs),
                      attrs + self.attrs()), bufs


NO_EPILOGUE = Epilogue()


def _size(shape: tuple[int, ...]) -> int:
    out = 1
    for s in shape:
        out *= s
    return out
