"""Code generation: per-family lowerings, the linker and the whole-model compiler."""

from .link import Fragment, Linked, link
from .lowering import LOWERINGS, Lowering, build, lowering_for, register

__all__ = ["LOWERINGS", "Fragment", "Linked", "Lowering", "build", "link", "lowering_for",
           "register"]
