"""The small families: placement spaces.

Workloads: ``rmsnorm`` (m, n), ``rope`` (m, h heads rotated, d), ``elementwise`` (m, n;
attr ``fn``: add | mul, an activation (silu | relu | gelu_tanh | gelu_erf) or
its gated ``{act}_mul``, ``scale`` (attr ``alpha``), ``softcap`` (attr ``cap``)),
``embedding`` (m, n hidden, v vocabulary), ``argmax`` (m, n), ``extern`` (m, n: an op
of the model no family covers, run on the host; attrs ``fn``, ``ins`` and ``params``
(shapes read), ``flops``).
"""

from search_spaces.pointwise.space import (
    ACTIVATION_FNS,
    DEFAULT_EPS,
    ELEMENTWISE_FNS,
    GATED_FNS,
    PIM_ACTIVATION,
    PIM_BINARY_FNS,
    POINTWISE_FAMILIES,
    VERSION,
    pim_unavailable,
    pointwise_default,
    pointwise_library,
    pointwise_space,
)

DIMS = {"rmsnorm": ("m", "n"), "rope": ("m", "h", "d"), "elementwise": ("m", "n"),
        "embedding": ("m", "n", "v"), "argmax": ("m", "n"), "extern": ("m", "n")}

__all__ = ["ACTIVATION_FNS", "DEFAULT_EPS", "DIMS", "ELEMENTWISE_FNS", "GATED_FNS",
           "PIM_ACTIVATION", "PIM_BINARY_FNS", "POINTWISE_FAMILIES",
           "VERSION", "pim_unavailable", "pointwise_default", "pointwise_library",
           "pointwise_space"]
