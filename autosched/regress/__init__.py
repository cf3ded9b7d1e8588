"""The performance-regression suite: versioned cases, one runner, an exact baseline."""

from .cases import SUITE_MODELS, KernelCase, ModelCase, TuneCase, resolve_model
from .results import CaseResult, OpFigures
from .runner import Runner, run_case
from .suites import SUITES, Suite, get_suite, readme_model_cases
from .tuned import TunedExport, TunedExportError, export_from_db

__all__ = [
    "SUITES", "SUITE_MODELS", "CaseResult", "KernelCase", "ModelCase", "OpFigures", "Runner",
    "Suite", "TuneCase", "TunedExport", "TunedExportError", "export_from_db", "get_suite",
    "readme_model_cases", "resolve_model", "run_case",
]
