"""Functional (numerical) execution of programs on real data.

``DeviceMemory`` holds bank contents (weights, KV cache) across calls, ``execute`` runs a
program against it and returns the host buffers, ``round_to`` rounds to device formats.
"""

from .dtypes import round_to
from .executor import execute
from .memory import DeviceMemory

__all__ = ["DeviceMemory", "execute", "round_to"]
