"""Code generation: per-family lowerings, their registry, the linker."""

from .link import Fragment, Linked, link
from .lowering import Lowering
from .registry import LOWERINGS, build, lowering_for

__all__ = ["LOWERINGS", "Fragment", "Linked", "Lowering", "build", "link", "lowering_for"]
