"""autosched's errors: the project-wide base lives in ``sim.errors`` (the lowest layer)."""

from sim.errors import AutoschedError, HardwareError, ProgramError, SimError, check

__all__ = ["AutoschedError", "HardwareError", "ProgramError", "SimError", "check"]
