"""The intermediate representation, free of torch: the operator graph of one model step,
its tuning tasks, and the step itself.

Capture (``autosched.frontend``) produces an :class:`OpGraph`, fusion
(``autosched.fusion``) rewrites it, and ``autosched.pipeline`` strings the two together;
everything below the command line and the public API takes these values.
"""

from .errors import FusionError, ModelError, PartitionError
from .graph import PHASES, OpGraph, OpNode
from .step import PlanKey, PlanKind, Step
from .tasks import Task, tasks

__all__ = ["PHASES", "FusionError", "ModelError", "OpGraph", "OpNode", "PartitionError", "PlanKey",
           "PlanKind", "Step", "Task", "tasks"]
