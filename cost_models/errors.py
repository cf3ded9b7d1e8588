"""The cost-model package's error: a model file or kind that cannot be used."""

from __future__ import annotations

from sim.errors import AutoschedError

__all__ = ["CostModelError"]


class CostModelError(AutoschedError):
    """A cost model cannot be made, read or trained; the message says what to fix."""
