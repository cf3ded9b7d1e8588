"""Shared set-up of the experiment notebooks: import path, quick mode, cache, bench config.

Importing this module puts the repository root on ``sys.path`` (the notebooks run with
``experiments/notebooks`` as working directory), so import it before the project's
packages; each notebook's first cell then runs ``QUICK, ROOT, CACHE = setup()``.
``AUTOSCHED_NB_QUICK=1`` in the environment selects the small budgets the test suite
uses; the committed outputs come from the full run.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

__all__ = ["bench_config", "quick_cases", "setup"]

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def setup() -> tuple[bool, Path, Path]:
    """(quick mode, repository root, experiments cache dir, created and self-ignoring).

    Figures use the notebook's inline backend (``%matplotlib inline``: Agg rendered to PNG).
    """
    cache = ROOT / "experiments" / ".cache"
    cache.mkdir(parents=True, exist_ok=True)
    (cache / ".gitignore").write_text("*\n")
    return os.environ.get("AUTOSCHED_NB_QUICK", "") == "1", ROOT, cache


def bench_config(quick: bool):
    """The search benchmark configuration behind the committed figures (quick: the
    benchmark's own ``--quick``)."""
    from experiments.bench_search import Config

    if quick:
        return Config.of(True, budget=16)
    return Config.of(False)


def quick_cases(presets: tuple[str, ...]) -> list:
    """Two small attention shapes (16 and 32 positions, two query heads on one KV head of
    16) on each preset: a few hundred points per case, so the held-out workload and
    hardware folds of the cost-model notebook run in seconds."""
    from experiments.bench_search import Case
    from search_spaces import Workload

    return [Case("toy", f"attention-l{n}", p,
                 Workload.make("attention", b=1, q=1, h=2, kvh=1, d=16, l=n))
            for n in (16, 32) for p in presets]
