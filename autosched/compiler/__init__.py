"""The whole-step compiler: one system program per model step (a device is the system of
one), its figures, the search over partitions and placements, its numerical check."""

from .builder import library_choice
from .choose import (
    best_partition,
    choose_partition,
    parse_partition,
    partition_bound,
    unfit_reason,
)
from .compile import CompiledStep, compile_step, partition_graph, pin_graph
from .figures import StepFigures, choose_placement, plain_memory_ns, simulate_step
from .partition import Partition
from .placement import PLACEMENTS, Placement, side_schedule
from .run import RunReport, run_check, tolerance
from .stage import CompiledStage

__all__ = [
    "PLACEMENTS", "CompiledStage", "CompiledStep", "Partition", "Placement", "RunReport",
    "StepFigures", "best_partition", "choose_partition", "choose_placement", "compile_step",
    "library_choice", "parse_partition", "partition_bound", "partition_graph", "pin_graph",
    "plain_memory_ns", "run_check", "side_schedule", "simulate_step", "tolerance",
    "unfit_reason",
]
