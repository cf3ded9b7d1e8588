"""Shared data: GEMV candidates of a few small shapes on both presets, simulated once."""

from __future__ import annotations

import numpy as np
import pytest

from cost_models import Candidate
from search_spaces import Workload
from sim.hwio import load_hardware

try:
    from .candidates import gemv_candidates, measure
except ImportError:
    from candidates import gemv_candidates, measure

SHAPES = ((1, 256, 512), (1, 1024, 256), (2, 512, 512), (1, 300, 700), (1, 512, 1024))


@pytest.fixture(scope="session")
def gemv_data() -> dict[tuple, tuple[list[Candidate], np.ndarray]]:
    """``{(preset, m, n, k): (candidates, latencies)}`` with 40 candidates per task."""
    rng = np.random.default_rng(7)
    out = {}
    for preset in ("hbm-pim", "aim-gddr6"):
        hw = load_hardware(preset)
        for m, n, k in SHAPES:
            cands = gemv_candidates(Workload.make("gemv", m=m, n=n, k=k), hw, 40, rng)
            out[(preset, m, n, k)] = (cands, measure(cands))
    return out


HELD_OUT = (("hbm-pim", 1, 512, 1024), ("aim-gddr6", 1, 512, 1024))


@pytest.fixture(scope="session")
def held_out(gemv_data) -> tuple[list[Candidate], np.ndarray, list[Candidate], np.ndarray]:
    """(train candidates, latencies, test candidates, latencies); test = HELD_OUT tasks."""
    data, test_keys = gemv_data, HELD_OUT
    tr = [k for k in data if k not in test_keys]
    tc = [c for k in tr for c in data[k][0]]
    tl = np.concatenate([data[k][1] for k in tr])
    vc = [c for k in test_keys for c in data[k][0]]
    vl = np.concatenate([data[k][1] for k in test_keys])
    return tc, tl, vc, vl
