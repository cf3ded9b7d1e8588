"""The search's error: a search configured wrongly, said with what to change."""

from __future__ import annotations

from sim.errors import AutoschedError

__all__ = ["SearchError"]


class SearchError(AutoschedError):
    """A search was configured wrongly (unknown strategy or sampler, bad budget, a context
    built from names instead of objects, a strategy that cannot serve the objective)."""
