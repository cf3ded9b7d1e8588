"""The mixture-of-experts family (see :mod:`.family`)."""

from .family import MoeFamily, active_path

__all__ = ["MoeFamily", "active_path"]
