"""XGBoost cost models: regression on log latency, and a ranker with one group per task.

Both read :func:`cost_models.features.featurize` vectors. Before any fit (and without a
pretrained base) they score by the analytical model: ``log2`` of the program's bound.
The regression's trees learn how far a program falls short of its bound, ``log2(latency)
- log_bound_ns``, and predictions add the bound back: the bound carries what scales with
the hardware and the shape, so the trees learn the ratio, which transfers (held out, the
llama-tiny attention cell on aim-gddr6 ranked at pairwise 0.79 with trees on log2
latency and 0.92 with trees on the ratio; held-out workloads 0.969 -> 0.983 on average).
``fit`` is called with every measurement so far. The first fit grows ``n_estimators``
trees from scratch, or ``refit_trees`` on top of the trees of a loaded (pretrained)
model, so a model trained on other workloads and hardware ranks from the first round and
is corrected by local data. Later fits are incremental: they add ``refit_trees`` trees to
the current booster (boosting on its residuals over all the data so far), until
``max_trees`` were added since the base, when the next fit starts again from the base.
A search refits after every round, so a refit costs a few small trees, not a new model.
Training uses ``nthread`` OpenMP threads, by default :data:`NTHREAD` (one: the
measurement pool owns the cores, and spinning OpenMP threads on busy cores slow a fit by
orders of magnitude).

The ranker uses ``rank:pairwise`` (LambdaMART without a gain weighting) over groups of
one task each (workload + hardware fingerprint). Within a group the latencies are ranked
and mapped linearly onto integer grades ``0 .. min(32, n) - 1``, fastest highest (the
same labels ``rank:ndcg`` would accept; its exponential gain needs grades below 32).
Rank-based grades are scale-free, so tasks of very different latency weigh the same, and
candidates whose ranks fall in the same 1/32 of the group share a grade (no pair).
Why pairwise and not ndcg: the search orders whole batches of proposals, and on held-out
GEMV tasks ``rank:pairwise`` reached pairwise accuracy 0.94-0.96 where ``rank:ndcg``
reached 0.65-0.86 (it spends its gradient on each group's top few). Pairs are sampled
with ``lambdarank_pair_method="mean"`` (32 per row), so the whole order is learned.
Saved as XGBoost UBJSON/JSON (``Booster.save_model``) plus ``<stem>.meta.json``.
"""

from __future__ import annotations

import abc
import json
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

import numpy as np
import xgboost as xgb

from sim.files import cut, load_json, read_bytes, shown
from sim.writes import write_atomic

from .base import Candidate, CostModel
from .errors import CostModelError
from .features import FEATURE_NAMES, FEATURE_VERSION, featurize
from .metrics import rankdata

__all__ = ["NTHREAD", "XGBRankModel", "XGBRegressionModel", "meta_path", "relevance",
           "task_key"]

FORMAT = "autosched-cost-model"
_BOUND = FEATURE_NAMES.index("log_bound_ns")
# what the trees of a regression model predict; a model saved for another target is refused
TARGET = "log2_latency_over_bound"


MAX_MODEL_BYTES = 256 << 20  # the shipped model is 0.4 MB
MAX_META_BYTES = 1 << 20
# Saved hyperparameters: name -> (type, lowest, highest), what a real model could use.
_PARAMS = {"seed": (int, 0, 2**32 - 1), "n_estimators": (int, 1, 100_000),
           "max_depth": (int, 1, 64), "learning_rate": (float, 1e-6, 1.0),
           "nthread": (int, 1, 4096), "refit_trees": (int, 0, 100_000),
           "max_trees": (int, 1, 100_000)}


def _params(params: object, source: Path) -> dict:
    """The saved hyperparameters, each typed and within :data:`_PARAMS`."""
    if not isinstance(params, dict) or set(params) - set(_PARAMS):
        raise CostModelError(f"{source}: params must be an object of "
                             f"{', '.join(_PARAMS)}")
    for k, v in params.items():
        tp, lo, hi = _PARAMS[k]
        ok = not isinstance(v, bool) and isinstance(v, int if tp is int else int | float)
        if not ok or not lo <= v <= hi:
            raise CostModelError(f"{source}: params.{k} must be a number in [{lo:g}, {hi:g}], "
                                 f"got {shown(v)}")
    return params


def meta_path(path: str | Path) -> Path:
    """The sidecar metadata file of a model saved at ``path``."""
    p = Path(path)
    return p.with_name(p.stem + ".meta.json")


def task_key(c: Candidate) -> str:
    """The ranking group of a candidate: its workload on its hardware."""
    return f"{c.workload.key}@{c.hw.fingerprint}"


def relevance(latencies: Sequence[float], levels: int = 32) -> np.ndarray:
    """Integer grades of one group: ``0 .. min(levels, n) - 1``, the fastest highest."""
    lat = np.asarray(latencies, dtype=float)
    n = len(lat)
    if n < 2:
        return np.zeros(n, dtype=np.int64)
    top = min(levels, n) - 1
    frac = (rankdata(lat) - 1) / (n - 1)
    return np.floor(top * (1.0 - frac) + 0.5).astype(np.int64)


# One OpenMP thread: fits are a few hundred rows, and the search fits while its simulator
# workers run; with every core busy, two spinning OpenMP threads made a 0.4 s fit take 45 s.
NTHREAD = 1


class _XGBModel(CostModel):
    """Shared fit/predict/save/load; subclasses set the objective and the labels."""

    kind: ClassVar[str]
    objective: ClassVar[dict]
    target: ClassVar[str]  # what the trees learn (saved; a load of another is refused)

    def __init__(self, *, seed: int = 0, n_estimators: int = 120, max_depth: int = 6,
                 learning_rate: float = 0.15, nthread: int = NTHREAD,
                 refit_trees: int = 16, max_trees: int = 160) -> None:
        self.params = {"seed": int(seed), "n_estimators": int(n_estimators),
                       "max_depth": int(max_depth), "learning_rate": float(learning_rate),
                       "nthread": int(nthread),
                       "refit_trees": int(refit_trees), "max_trees": int(max_trees)}
        self.base: xgb.Booster | None = None
        self.booster: xgb.Booster | None = None
        self.n_train = 0
        self.added = 0  # trees grown since the base (or since scratch)
        self.info: dict = {}

    def _xgb_params(self) -> dict:
        p = self.params
        return {"tree_method": "hist", "max_depth": p["max_depth"], "eta": p["learning_rate"],
                "seed": p["seed"], "nthread": p["nthread"], "subsample": 0.9,
                "colsample_bytree": 0.9, "min_child_weight": 1.0, "verbosity": 0,
                **self.objective}

    @abc.abstractmethod
    def _dmatrix(self, x: np.ndarray, y: np.ndarray, groups: list[str]) -> xgb.DMatrix | None:
        """The training matrix with this model's labels (and groups), None if too small."""

    def fit(self, candidates: Sequence[Candidate], latencies_ns: Sequence[float]) -> None:
        if len(candidates) != len(latencies_ns):
            raise CostModelError(f"fit got {len(candidates)} candidates and "
                                 f"{len(latencies_ns)} latencies; pass one each (inf = failed)")
        y = np.asarray(latencies_ns, dtype=float)
        ok = np.isfinite(y) & (y > 0)
        kept = [c for c, keep in zip(candidates, ok, strict=True) if keep]
        self.fit_features(featurize(kept), y[ok], [task_key(c) for c in kept])

    def fit_features(self, x: np.ndarray, latencies_ns: np.ndarray, groups: Sequence[str]) -> None:
        """:meth:`fit` on precomputed feature rows; ``groups`` are the rows' task keys."""
        y = np.asarray(latencies_ns, dtype=float)
        ok = np.isfinite(y) & (y > 0)
        if ok.sum() < 2:
            return
        dm = self._dmatrix(np.asarray(x)[ok], y[ok], np.asarray(groups)[ok].tolist())
        if dm is None:
            return
        p = self.params
        grown = self.booster is not None and self.booster is not self.base
        if grown and self.added + p["refit_trees"] <= p["max_trees"]:
            start, n = self.booster, p["refit_trees"]  # incremental: boost the residuals
        elif self.base is not None:
            start, n, self.added = self.base.copy(), p["refit_trees"], 0
        else:
            start, n, self.added = None, p["n_estimators"], 0
        self.booster = xgb.train(self._xgb_params(), dm, n, xgb_model=start)
        self.added += n
        self.n_train = int(ok.sum())

    def freeze(self) -> None:
        """Make the current trees the base: later fits add to them, as after :meth:`load`
        (how a model trained on other tasks becomes a transfer model)."""
        if self.booster is None:
            raise CostModelError(f"{self.name} model has not been fitted: nothing to freeze")
        self.base = self.booster

    @abc.abstractmethod
    def _raw(self, x: np.ndarray) -> np.ndarray:
        """Lower is faster: predicted log2 latency, or minus the ranking score."""

    def predict(self, candidates: Sequence[Candidate]) -> np.ndarray:
        return self.predict_features(featurize(list(candidates)))

    def predict_features(self, x: np.ndarray) -> np.ndarray:
        """:meth:`predict` on precomputed feature rows."""
        if len(x) == 0:
            return np.zeros(0)
        if self.booster is None:
            return np.asarray(x)[:, _BOUND].astype(float)
        return self._raw(np.asarray(x))

    def save(self, path: str | Path) -> None:
        if self.booster is None:
            raise CostModelError(f"{self.name} model has not been fitted: nothing to save; "
                                 "call fit() first")
        booster = self.booster
        write_atomic(Path(path), lambda p: booster.save_model(str(p)), what="cost model",
                     error=CostModelError)
        meta = {"format": FORMAT, "kind": self.kind, "target": self.target,
                "feature_version": FEATURE_VERSION,
                "feature_names": list(FEATURE_NAMES), "params": self.params,
                "n_train": self.n_train, "info": self.info}
        write_atomic(meta_path(path), json.dumps(meta, indent=1), what="cost model",
                     error=CostModelError)

    @classmethod
    def load(cls, path: str | Path) -> _XGBModel:
        mp = meta_path(path)
        meta = load_json(mp, limit=MAX_META_BYTES, what="cost model metadata",
                         error=CostModelError)
        if not isinstance(meta, dict):
            raise CostModelError(f"{mp} is not the metadata of a cost model")
        if meta.get("format") != FORMAT or meta.get("kind") != cls.kind:
            raise CostModelError(f"{path} holds a {shown(meta.get('kind'))} model, not "
                                 f"{cls.kind!r}")
        if meta.get("feature_names") != list(FEATURE_NAMES):
            version = shown(meta.get("feature_version"))
            raise CostModelError(f"{path} was trained on features v{version}"
                                 f", this code computes v{FEATURE_VERSION}: retrain it with "
                                 "python -m experiments.train_cost_model")
        target = meta.get("target", "log2_latency")  # models saved before targets were named
        if target != cls.target:
            raise CostModelError(f"{path} was trained to predict {cut(str(target), 60)}, "
                                 f"this code's {cls.kind} model predicts {cls.target}: retrain "
                                 "it with python -m experiments.train_cost_model")
        model = cls(**{**_params(meta.get("params"), mp), "nthread": NTHREAD})  # not this host's
        raw = read_bytes(path, limit=MAX_MODEL_BYTES, what="cost model", error=CostModelError)
        booster = xgb.Booster()
        try:
            booster.load_model(bytearray(raw))
        except xgb.core.XGBoostError as e:
            raise CostModelError(f"{path} is not a saved XGBoost model "
                                 f"({cut(str(e).splitlines()[0] if str(e) else '', 120)})"
                                 ) from None
        booster.set_param({"nthread": model.params["nthread"]})
        model.base, model.booster = booster, booster
        n_train, info = meta.get("n_train", 0), meta.get("info", {})
        if isinstance(n_train, bool) or not isinstance(n_train, int) or n_train < 0 \
                or not isinstance(info, dict):
            raise CostModelError(f"{mp}: n_train must be a count and info an object")
        model.n_train, model.info = n_train, dict(info)
        return model


class XGBRegressionModel(_XGBModel):
    """Gradient-boosted trees regressing log2 latency (``reg:squarederror``) as the bound's
    ``log_bound_ns`` plus the trees' ``log2(latency) - log_bound_ns``."""

    name = "xgb"
    kind = "xgb"
    objective: ClassVar[dict] = {"objective": "reg:squarederror"}
    target = TARGET

    def _dmatrix(self, x: np.ndarray, y: np.ndarray, groups: list[str]) -> xgb.DMatrix:
        return xgb.DMatrix(x, label=np.log2(y) - x[:, _BOUND], feature_names=list(FEATURE_NAMES))

    def _raw(self, x: np.ndarray) -> np.ndarray:
        return np.asarray(self.booster.inplace_predict(x), dtype=float) + x[:, _BOUND]

    def latency_ns(self, scores: np.ndarray) -> np.ndarray | None:
        """Predicted log2 latency back to ns (before any fit: the bound's log2 of 1 + ns)."""
        return np.exp2(np.asarray(scores, dtype=float))


class XGBRankModel(_XGBModel):
    """LambdaMART (``rank:ndcg``) over tasks; graded relevance from ranks (module doc)."""

    name = "xgb-rank"
    kind = "xgb-rank"
    target = "rank"
    objective: ClassVar[dict] = {"objective": "rank:pairwise", "lambdarank_pair_method": "mean",
                                 "lambdarank_num_pair_per_sample": 32}

    def _dmatrix(self, x: np.ndarray, y: np.ndarray, groups: list[str]) -> xgb.DMatrix | None:
        ids = {g: i for i, g in enumerate(dict.fromkeys(groups))}
        qid = np.asarray([ids[g] for g in groups])
        sizes = np.bincount(qid)
        keep = sizes[qid] >= 2  # a group of one carries no order
        if not keep.any():
            return None
        order = np.argsort(qid[keep], kind="mergesort")  # XGBoost needs rows sorted by qid
        x, y, qid = x[keep][order], y[keep][order], qid[keep][order]
        label = np.empty(len(y), dtype=np.int64)
        for q in np.unique(qid):
            sel = qid == q
            label[sel] = relevance(y[sel])
        return xgb.DMatrix(x, label=label, qid=qid, feature_names=list(FEATURE_NAMES))

    def _raw(self, x: np.ndarray) -> np.ndarray:
        return -np.asarray(self.booster.inplace_predict(x), dtype=float)
