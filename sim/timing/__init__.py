"""Cycle-level timing and energy of a program: ``simulate(program, hw) -> SimResult``.

Per-bank state machines and a per-channel command and data bus honour every DRAM timing,
refresh included; each SPMD PIM stream is simulated on one representative channel and
scaled by its channel count; loops are extrapolated once their timing is periodic.
``docs/simulator.md`` states what is modelled.
"""

from .engine import simulate, simulate_system
from .result import SimResult, SystemResult

__all__ = ["SimResult", "SystemResult", "simulate", "simulate_system"]
