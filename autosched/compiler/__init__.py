"""The whole-model compiler: one program per model step, its figures, its numerical check."""

from .compile import CompiledModel, compile_model, host_schedule, library_choice, plan_key
from .figures import ModelFigures, plain_memory_ns, simulate_model
from .run import RunReport, run_check, tolerance

__all__ = [
    "CompiledModel", "ModelFigures", "RunReport", "compile_model",
    "host_schedule", "library_choice", "plain_memory_ns", "plan_key", "run_check", "simulate_model",
    "tolerance",
]
