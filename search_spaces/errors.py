"""Errors of the space language: a malformed space, or a point a space rejects."""

from __future__ import annotations

from sim.errors import AutoschedError

__all__ = ["ScheduleError", "SpaceError"]


class SpaceError(AutoschedError):
    """A space, domain, condition or constraint is declared wrongly (a bug in a space builder)."""


class ScheduleError(AutoschedError):
    """A point or schedule is not valid in its space; the message lists every reason."""
