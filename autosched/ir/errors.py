"""The error of the model side of the compiler: a model, its configuration or its graph."""

from __future__ import annotations

from sim.errors import AutoschedError

__all__ = ["FusionError", "ModelError", "PartitionError"]


class ModelError(AutoschedError):
    """A model, its configuration or its operator graph is outside what autosched handles."""


class FusionError(AutoschedError):
    """A fusion plan does not fit the graph, or a kernel operand cannot be found."""


class PartitionError(AutoschedError):
    """A partition that cannot compute this step's graph (a norm or structure that does
    not split or stage): the partition is refused, another may be chosen."""
