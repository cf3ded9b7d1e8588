"""The fault suite: real ``autosched tune`` processes killed, raced, starved of disk.

CI runs a few repetitions of each fault; ``experiments/bench_distributed.py --faults``
runs the long version (20 races per database, 10 kills in a row).
"""

from __future__ import annotations

import pytest

from experiments.scenarios import write_config


@pytest.fixture
def config(tmp_path):
    """A one-layer model's config.json."""
    return write_config(tmp_path)

