"""One lowering per operator family: its space, its default, its bound, its code.

A :class:`Lowering` turns (workload, schedule point, hardware) into a
:class:`sim.kernels.Kernel` written as if it owned the device: weights from row 0 of
every bank, its own buffer and token names. The linker (``link.py``) places several of
them in one program. Kernel conventions every lowering follows:

* ``kernel.inputs`` lists host buffers the caller binds, activations first, in the order
  of the workload's documented inputs, then host constants (norm weights, rotary tables,
  biases) by the names the family documents;
* ``kernel.output`` is the result buffer (fp32, logical shape, no padding);
* ``kernel.place(mem, tensors)`` writes the family's weight tensors into the banks; for
  attention the KV cache region is reserved and persists between executions.

The built-in implementations live in ``families/`` (one folder per family) and are listed
in :data:`autosched.codegen.registry.LOWERINGS`.
"""

from __future__ import annotations

import abc
from typing import ClassVar

from search_spaces import Space, Workload
from sim.hardware import Hardware
from sim.kernels import Kernel

__all__ = ["Lowering"]


class Lowering(abc.ABC):
    """The contract of one operator family. Stateless; safe to share between threads."""

    families: ClassVar[tuple[str, ...]]

    @abc.abstractmethod
    def space(self, workload: Workload, hw: Hardware) -> Space:
        """The schedule space of ``workload`` on ``hw`` (hardware limits as constraints)."""

    @abc.abstractmethod
    def default(self, workload: Workload, hw: Hardware) -> dict:
        """What a competent engineer would write by hand; always a valid point."""

    @abc.abstractmethod
    def lower(self, workload: Workload, point: dict, hw: Hardware) -> Kernel:
        """The program of one valid point (callers validate first; see :func:`build`)."""

    @abc.abstractmethod
    def bound(self, workload: Workload, hw: Hardware) -> float:
        """Lower bound in ns over every schedule of the space (for tuned/bound ratios)."""

    def tensors(self, workload: Workload) -> tuple[str, ...]:
        """Names of the weight tensors ``place`` expects (none by default)."""
        return ()

    def library(self, workload: Workload, hw: Hardware) -> dict | None:
        """The point of the space that is the shipped library kernel (``sim/kernels``, as a
        hardware team hands it over) for ``workload``; None when the library has no kernel
        for it (the default: families without one) or the kernel does not fit."""
        return None

    def named_points(self, workload: Workload, hw: Hardware) -> dict[str, dict]:
        """The space's named points: ``default`` and, where there is one, ``library``."""
        named = {"default": self.default(workload, hw)}
        lib = self.library(workload, hw)
        if lib is not None:
            named["library"] = lib
        return named
