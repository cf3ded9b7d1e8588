"""Names a checkpoint may store a parameter under: ``transformers`` renames some tensors
between its files and its modules (GPT-NeoX's ``embed_out`` is the module's
``lm_head``); ``save_pretrained`` writes the file's names back. Only plain renamings are
reversed (a literal prefix for a literal prefix)."""

from __future__ import annotations

import re
from typing import Any

__all__ = ["stored_names"]


def stored_names(model: Any, name: str) -> list[str]:
    """Other names the checkpoint of ``model`` may hold parameter ``name`` under."""
    try:
        from transformers.conversion_mapping import get_model_conversion_mapping
        from transformers.core_model_loading import WeightRenaming

        rules = get_model_conversion_mapping(model)
    except (ImportError, AttributeError, TypeError, ValueError):
        return []
    out = []
    for r in rules:
        if not isinstance(r, WeightRenaming) or len(r.source_patterns) != 1:
            continue
        src, tgt = r.source_patterns[0], r.target_patterns[0]
        literal = src.removeprefix("^").replace("\\.", ".")
        if src.startswith("^") and re.fullmatch(r"[\w.]+", literal) and \
                re.fullmatch(r"[\w.]+", tgt) and name.startswith(tgt):
            out.append(literal + name[len(tgt):])
    return out
