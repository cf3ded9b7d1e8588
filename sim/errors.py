"""The project's one exception base and the ``check`` helper.

Every error autosched raises on purpose derives from :class:`AutoschedError`; search
loops catch only this base, so a bug (any other exception) still surfaces.
"""

from __future__ import annotations

__all__ = ["AutoschedError", "CapacityError", "HardwareError", "InternalError", "ProgramError",
           "SimError", "check"]


class AutoschedError(Exception):
    """Base of every deliberate autosched error; the message says what to fix.

    ``exit_code`` is the command line's exit status for it: 2 (bad input) unless a
    subclass says otherwise.
    """

    exit_code = 2


class InternalError(AutoschedError):
    """autosched itself is wrong (e.g. the code generator produced an invalid program),
    not the input: exit status 1. The message names what was being compiled."""

    exit_code = 1


class HardwareError(AutoschedError):
    """A hardware description is malformed or names an unknown preset."""


class ProgramError(AutoschedError):
    """A program is malformed: bad operand, unknown buffer, invalid bank set."""


class SimError(AutoschedError):
    """A well-formed program cannot run: deadlock, no open row, capacity exceeded."""


class CapacityError(SimError):
    """A program's memory does not fit its device: ``needed`` and ``capacity`` in bytes."""

    def __init__(self, msg: str, *, needed: int, capacity: int) -> None:
        super().__init__(msg)
        self.needed = needed
        self.capacity = capacity


def check(cond: object, msg: str, exc: type[AutoschedError] = AutoschedError) -> None:
    """Raise ``exc(msg)`` unless ``cond`` holds."""
    if not cond:
        raise exc(msg)
