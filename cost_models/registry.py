"""One wiring point: turn a kind string, a file path or an instance into a cost model.

Kinds: ``"xgb"`` (regression on log latency, starting from the shipped pretrained trees:
the transfer a new task gets; from scratch when no compatible shipped model exists),
``"xgb-scratch"`` (the same regression from scratch), ``"xgb-rank"`` (pairwise ranker per task),
``"bound"`` (analytical bound), ``"random"`` (seeded), ``"none"`` (all scores 0),
``"pretrained"`` or ``"pretrained:<name>"`` (a model shipped in ``cost_models/pretrained``),
or the path of a file written by any model's ``save``.
"""

from __future__ import annotations

from pathlib import Path

from sim.files import load_json, shown

from .base import CostModel
from .baselines import BoundModel, ConstantModel, RandomModel
from .errors import CostModelError
from .xgb import MAX_META_BYTES, XGBRankModel, XGBRegressionModel, meta_path

__all__ = ["KINDS", "PRETRAINED_DIR", "load_cost_model", "make_cost_model", "pretrained"]

PRETRAINED_DIR = Path(__file__).parent / "pretrained"
_CLASSES: dict[str, type[CostModel]] = {
    c.name: c for c in (XGBRegressionModel, XGBRankModel, BoundModel, RandomModel, ConstantModel)
}
KINDS: tuple[str, ...] = (*_CLASSES, "xgb-scratch", "pretrained")


def load_cost_model(path: str | Path) -> CostModel:
    """Read any saved model; its kind comes from the sidecar metadata or the JSON file."""
    p = Path(path)
    if not p.exists():
        raise CostModelError(f"no cost model file at {p}")
    meta = meta_path(p)
    try:
        d = load_json(meta if meta.exists() else p, limit=MAX_META_BYTES,
                      what="cost model", error=CostModelError)
    except CostModelError:
        if meta.exists():
            raise
        d = None  # not JSON: a model file without its metadata
    kind = d.get("kind") if isinstance(d, dict) else None
    if not isinstance(kind, str) or kind not in _CLASSES:
        raise CostModelError(f"{p} is not a saved cost model (kind {shown(kind)}); saved "
                             f"models are one of {', '.join(_CLASSES)}")
    return _CLASSES[kind].load(p)


def pretrained(name: str = "default") -> CostModel:
    """The model shipped as ``cost_models/pretrained/<name>.ubj``."""
    path = PRETRAINED_DIR / f"{name}.ubj"
    if not path.exists():
        have = sorted(q.stem for q in PRETRAINED_DIR.glob("*.ubj"))
        raise CostModelError(f"no pretrained cost model {name!r} (have: "
                             f"{', '.join(have) or 'none'}); build one with "
                             "python -m experiments.train_cost_model")
    return load_cost_model(path)


def _transfer(seed: int) -> XGBRegressionModel:
    """The shipped regression model as the base of later fits, reseeded; a fresh model when
    none is shipped or it was trained on other features."""
    try:
        model = pretrained()
    except CostModelError:
        return XGBRegressionModel(seed=seed)
    if not isinstance(model, XGBRegressionModel):
        return XGBRegressionModel(seed=seed)
    model.params["seed"] = int(seed)
    return model


def make_cost_model(kind: str | Path | CostModel = "xgb", *, seed: int = 0) -> CostModel:
    """A cost model from a kind, a saved file, or an instance (returned unchanged)."""
    if isinstance(kind, CostModel):
        return kind
    if isinstance(kind, Path):
        return load_cost_model(kind)
    if not isinstance(kind, str):
        raise CostModelError(f"cost model must be a kind string, a path or a CostModel, "
                             f"got {type(kind).__name__}")
    if kind == "xgb":
        return _transfer(seed)
    if kind in ("xgb-scratch", "xgb-rank"):
        return _CLASSES[kind.replace("-scratch", "")](seed=seed)
    if kind == "random":
        return RandomModel(seed=seed)
    if kind in ("bound", "none"):
        return _CLASSES[kind]()
    if kind == "pretrained" or kind.startswith("pretrained:"):
        return pretrained(kind.partition(":")[2] or "default")
    if Path(kind).exists() or "/" in kind or kind.endswith((".ubj", ".json")):
        return load_cost_model(kind)  # a path: a missing file is named as such
    raise CostModelError(f"unknown cost model {kind!r}: use one of {', '.join(KINDS)}, "
                         "'pretrained:<name>' or the path of a saved model")
