"""Ranking quality of predictions against measured latencies (lower is better for both).

Every metric takes one group (one task: a workload on one hardware) as two equal-length
arrays; :func:`evaluate` averages each metric over the groups with at least two finite
measurements. Definitions:

* pairwise accuracy: over pairs with different true latency, the fraction the prediction
  orders the same way (a tie in the prediction counts one half);
* Spearman: Pearson correlation of the ranks (ties get their average rank); 0 when either
  side is constant;
* top-k recall: ``|top-k by prediction  &  top-k by truth| / k``;
* top-k score (TenSet style): ``best true latency / best true latency among the top-k
  picks of the prediction``, in (0, 1], 1 when the model's k picks contain the optimum.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .errors import CostModelError

__all__ = ["evaluate", "pairwise_accuracy", "rankdata", "spearman", "topk_recall", "topk_score"]


def _pair(true: Sequence[float], pred: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    t, p = np.asarray(true, dtype=float), np.asarray(pred, dtype=float)
    if t.shape != p.shape or t.ndim != 1:
        raise CostModelError(f"true and pred must be 1-D of equal length, got {t.shape} "
                             f"and {p.shape}")
    return t, p


def pairwise_accuracy(true: Sequence[float], pred: Sequence[float]) -> float:
    """Fraction of distinguishable pairs the prediction orders like the truth."""
    t, p = _pair(true, pred)
    dt = np.sign(t[:, None] - t[None, :])
    dp = np.sign(p[:, None] - p[None, :])
    mask = np.triu(dt != 0, k=1)
    n = int(mask.sum())
    if n == 0:
        return 1.0
    agree = (dt == dp)[mask].sum() + 0.5 * (dp == 0)[mask].sum()
    return float(agree / n)


def rankdata(x: Sequence[float]) -> np.ndarray:
    """Ranks 1..n, ties given the average of the ranks they span."""
    a = np.asarray(x, dtype=float)
    order = np.argsort(a, kind="mergesort")
    ranks = np.empty(len(a))
    sa = a[order]
    i = 0
    while i < len(a):
        j = i
        while j + 1 < len(a) and sa[j + 1] == sa[i]:
            j += 1
        ranks[order[i:j + 1]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def spearman(true: Sequence[float], pred: Sequence[float]) -> float:
    """Spearman rank correlation in [-1, 1]."""
    t, p = _pair(true, pred)
    rt, rp = rankdata(t) - (len(t) + 1) / 2, rankdata(p) - (len(p) + 1) / 2
    den = float(np.sqrt((rt * rt).sum() * (rp * rp).sum()))
    return float((rt * rp).sum() / den) if den > 0 else 0.0


def topk_recall(true: Sequence[float], pred: Sequence[float], k: int) -> float:
    """Share of the true k fastest found among the k predicted fastest."""
    t, p = _pair(true, pred)
    k = min(k, len(t))
    if k < 1:
        raise CostModelError(f"top-k needs k >= 1 and a non-empty group, got k={k}")
    a = set(np.argsort(p, kind="mergesort")[:k].tolist())
    b = set(np.argsort(t, kind="mergesort")[:k].tolist())
    return len(a & b) / k


def topk_score(true: Sequence[float], pred: Sequence[float], k: int) -> float:
    """Best true latency over the best true latency among the model's top-k picks."""
    t, p = _pair(true, pred)
    k = min(k, len(t))
    if k < 1:
        raise CostModelError(f"top-k needs k >= 1 and a non-empty group, got k={k}")
    picked = t[np.argsort(p, kind="mergesort")[:k]]
    return float(t.min() / picked.min())


def evaluate(groups: Sequence[object], true: Sequence[float], pred: Sequence[float],
             k: int = 5) -> dict[str, float]:
    """Each metric averaged over groups (non-finite latencies dropped); plus ``groups``."""
    g = np.asarray([str(x) for x in groups])
    t, p = _pair(true, pred)
    if len(g) != len(t):
        raise CostModelError(f"{len(g)} group labels for {len(t)} latencies")
    acc: dict[str, list[float]] = {"pairwise": [], "spearman": [], f"recall@{k}": [],
                                   f"score@{k}": [], "score@1": []}
    for name in dict.fromkeys(g.tolist()):
        sel = (g == name) & np.isfinite(t)
        if sel.sum() < 2:
            continue
        tt, pp = t[sel], p[sel]
        acc["pairwise"].append(pairwise_accuracy(tt, pp))
        acc["spearman"].append(spearman(tt, pp))
        acc[f"recall@{k}"].append(topk_recall(tt, pp, k))
        acc[f"score@{k}"].append(topk_score(tt, pp, k))
        acc["score@1"].append(topk_score(tt, pp, 1))
    out = {m: float(np.mean(v)) if v else float("nan") for m, v in acc.items()}
    out["groups"] = float(len(acc["pairwise"]))
    return out
