"""Cost models: rank schedule candidates before the simulator measures them.

A model scores :class:`Candidate` s (lower = predicted faster) from family-independent
features of the lowered program and the hardware (:mod:`cost_models.features`). Kinds:
XGBoost regression and ranking, the analytical bound, random, none; a pretrained model
ships in ``cost_models/pretrained``. :func:`make_cost_model` is the one entry point.
"""

from .base import Candidate, CostModel
from .baselines import BoundModel, ConstantModel, RandomModel
from .errors import CostModelError
from .features import FEATURE_NAMES, FEATURE_VERSION, features, featurize, useful_macs
from .metrics import evaluate, pairwise_accuracy, spearman, topk_recall, topk_score
from .program_stats import ProgramStats, program_stats
from .registry import KINDS, load_cost_model, make_cost_model, pretrained
from .xgb import XGBRankModel, XGBRegressionModel, relevance, task_key

__all__ = [
    "FEATURE_NAMES", "FEATURE_VERSION", "KINDS", "BoundModel", "Candidate", "ConstantModel",
    "CostModel", "CostModelError", "ProgramStats", "RandomModel", "XGBRankModel",
    "XGBRegressionModel", "evaluate", "featurize", "features", "load_cost_model",
    "make_cost_model", "pairwise_accuracy", "pretrained", "program_stats", "relevance",
    "spearman", "task_key", "topk_recall", "topk_score", "useful_macs",
]
