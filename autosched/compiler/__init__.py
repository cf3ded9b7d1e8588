"""The whole-model compiler: one program per model step, its figures, its numerical check."""

from .compile import CompiledModel, compile_model, library_choice, plan_key
from .figures import ModelFigures, choose_plan, plain_memory_ns, simulate_model
from .placement import PLANS, side_schedule
from .run import RunReport, run_check, tolerance

__all__ = [
    "CompiledModel", "ModelFigures", "PLANS", "RunReport", "choose_plan", "compile_model",
    "library_choice", "plain_memory_ns", "plan_key", "run_check", "side_schedule",
    "simulate_model",
    "tolerance",
]
