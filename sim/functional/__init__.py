"""Functional (numerical) execution of programs on real data.

``DeviceMemory`` holds bank contents (weights, KV cache) across calls, ``execute`` runs a
program against it (``execute_system`` a system program against one memory per device)
and returns the host buffers, ``round_to`` rounds to device formats.
"""

from .dtypes import round_to
from .executor import execute, execute_system
from .memory import DeviceMemory

__all__ = ["DeviceMemory", "execute", "execute_system", "round_to"]
