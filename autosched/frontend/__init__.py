"""Model frontend: configs and built-in models, the ``transformers`` module of a model,
and capture of one step's ATen graph to an operator graph (:mod:`autosched.ir`).

``capture("llama-tiny", phase="decode", context=128)`` -> :class:`~autosched.ir.OpGraph`.
"""

from .capture import capture
from .config import MODEL_TYPES, ModelConfig, ModelError
from .module import build_module, config_of_module, torch_dtype
from .zoo import get_model_config, list_models

__all__ = [
    "MODEL_TYPES", "ModelConfig", "ModelError", "build_module", "capture",
    "config_of_module", "get_model_config", "list_models", "torch_dtype",
]
