"""Model frontend: configs and built-in models, our torch decoder, capture to an operator
graph, and deduplication into tuning tasks.

``capture("llama-tiny", phase="decode", context=128)`` -> :class:`OpGraph`;
``tasks(graph)`` -> unique workloads with their occurrence counts.
"""

from .capture import GEMV_MAX_M, capture
from .config import MODEL_TYPES, ModelConfig, ModelError
from .graph import PHASES, OpGraph, OpNode
from .llama import LlamaModel, build_model, empty_cache, torch_dtype
from .step import model_graph, with_attrs, with_context
from .tasks import Task, tasks
from .zoo import get_model_config, list_models

__all__ = [
    "GEMV_MAX_M", "MODEL_TYPES", "PHASES", "LlamaModel", "ModelConfig", "ModelError", "OpGraph",
    "OpNode", "Task", "build_model", "capture", "empty_cache", "get_model_config",
    "list_models", "model_graph", "tasks", "torch_dtype", "with_attrs", "with_context",
]
