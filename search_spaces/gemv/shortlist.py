"""Which of the ranked library options the GEMV default takes: the estimate's shortlist,
timed.

The layout estimate (``sim.kernels.gemv_bound.layout_estimate_ns``) orders the options of
one reduction split and tile well, but not exactly across them: where two layouts
estimate within a few percent of each other, the simulated order can differ by as much
(Qwen2's 1536x8960 on aim-gddr6: the third option by estimate, 1.8 % above the first,
simulates 0.6 % faster; Llama 2's 5632x2048 on hbm-pim, 1.8 %). A careful engineer times
the few candidates the arithmetic cannot separate; so does the default: the ``TOP``
options of least estimate and the least-estimate option of every reduction split and
input tile within ``SLACK`` of the least estimate are simulated once (one kernel each,
milliseconds), and the fastest leads. Options the estimate puts further behind are not
timed: no shape of the public configs has one that simulates faster.
"""

from __future__ import annotations

from collections.abc import Sequence

from sim.hardware import Hardware
from sim.kernels import GemvOpts
from sim.kernels.gemv import gemv
from sim.timing import simulate

__all__ = ["SLACK", "TOP", "timed_order"]

TOP = 3
SLACK = 1.05


def timed_order(hw: Hardware, n: int, k: int, m: int,
                ranked: Sequence[tuple[float, GemvOpts]]) -> list[GemvOpts]:
    """The options of ``ranked`` ((estimate, option) pairs, least estimate first, every
    option valid) with the shortlist moved to the front in order of simulated latency
    (ties keep the estimate's order); the rest follow in their estimate order."""
    if not ranked:
        return []
    least = ranked[0][0]
    short: list[int] = []
    seen: set[tuple[int, int | None]] = set()
    for i, (est, o) in enumerate(ranked):
        if i >= TOP and est > SLACK * least:
            break
        if i < TOP or (o.k_split, o.gb_tile) not in seen:
            short.append(i)
        seen.add((o.k_split, o.gb_tile))
    timed = sorted(short, key=lambda i: (simulate(gemv(hw, n, k, m, ranked[i][1]).program,
                                                  hw).latency_ns, i))
    chosen = set(short)
    return [ranked[i][1] for i in timed] + [o for i, (_, o) in enumerate(ranked)
                                            if i not in chosen]
