"""The operator family: one object that answers every question the compiler asks about
the workloads it owns.

A :class:`Family` turns (workload, schedule point, hardware) into a
:class:`sim.kernels.Kernel` written as if it owned the device (weights from row 0 of
every bank, its own buffer and token names; the linker places several in one program),
and beside its code it says what the rest of the compiler needs to know: the bytes its
weights and caches keep in the banks, the resource terms of its bound, where it runs in
a step that keeps one side only, how its workload follows the step (context, capacity,
resident layouts, tensor-parallel shares), denser layouts when memory is short, its
output's columns and its kernel's operands, and its numerical semantics for the
reference evaluator. The compiler iterates the registry (:mod:`.registry`) and never
names an op. Kernel conventions every family follows:

* ``kernel.inputs`` lists host buffers the caller binds, activations first, in the order
  of :meth:`Family.operand_names`, then host constants (norm weights, rotary tables,
  biases) by the names :meth:`Family.constants` gives them;
* ``kernel.output`` is the result buffer (fp32, logical shape ``[rows, output_width]``);
* ``kernel.place(mem, tensors)`` writes :meth:`Family.weights` into the banks; a family
  holding a cache reserves it there and it persists between executions.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from search_spaces import Schedule, Space, Workload
from sim.hardware import Hardware
from sim.kernels import Kernel

if TYPE_CHECKING:
    from autosched.database import Database
    from autosched.ir import OpGraph, OpNode

__all__ = ["ROLE_LABELS", "Family", "Option"]

Arr = np.ndarray


@dataclass(frozen=True)
class Option:
    """Best-case ns of one placement of a workload on each resource of a step's bound:
    ``dev`` the device's channels (work over all of them), ``host`` the host engine,
    ``chain`` from its inputs being ready to its output being ready."""

    dev: float
    host: float
    chain: float


# roles whose output a consumer gathers by label (an unfused q_proj holds "q")
ROLE_LABELS = {"q_proj": "q", "k_proj": "k", "v_proj": "v", "ffn_gate": "gate", "ffn_up": "up",
               "q_norm": "q", "k_norm": "k"}


class Family(abc.ABC):
    """The contract of one operator family. Stateless; safe to share between threads.

    ``ops`` are the workload ops it owns (``Workload.op``). Only :meth:`space`,
    :meth:`default`, :meth:`lower` and :meth:`bound` must be written; every other
    answer has the default of a family that keeps nothing in the banks, reads one input
    ``x`` and writes ``[m, n]``.
    """

    ops: ClassVar[tuple[str, ...]]
    #: engine parameters of its spaces, each valued ``pim`` or ``host``
    engine_params: ClassVar[tuple[str, ...]] = ("placement",)
    #: a step placed on PIM only keeps this family in the banks
    in_banks: ClassVar[bool] = False
    #: its kernel reads the step's token ids (``ids``) rather than another node's output
    reads_tokens: ClassVar[bool] = False
    #: its kernel reshapes whole inputs of any row count itself (no gather needed)
    reshapes_inputs: ClassVar[bool] = False

    # ---- space and code ------------------------------------------------------------
    @abc.abstractmethod
    def space(self, workload: Workload, hw: Hardware) -> Space:
        """The schedule space of ``workload`` on ``hw`` (hardware limits as constraints)."""

    @abc.abstractmethod
    def default(self, workload: Workload, hw: Hardware) -> dict:
        """What a competent engineer would write by hand; always a valid point."""

    @abc.abstractmethod
    def lower(self, workload: Workload, point: dict, hw: Hardware) -> Kernel:
        """The program of one valid point (callers validate first; see ``registry.build``)."""

    @abc.abstractmethod
    def bound(self, workload: Workload, hw: Hardware) -> float:
        """Lower bound in ns over every schedule of the space (for tuned/bound ratios)."""

    def decompose(self, workload: Workload, point: dict, hw: Hardware) -> dict[str, float]:
        """Where the latency of ``point`` goes (``sim.timing.decompose``: refresh,
        activations, bus, host, rest; they add up to ``latency``), to set against the
        bound."""
        from sim.timing.decompose import decompose

        return decompose(self.lower(workload, point, hw).program, hw)

    def library(self, workload: Workload, hw: Hardware) -> dict | None:
        """The point of the space that is the shipped library kernel (``sim/kernels``, as a
        hardware team hands it over); None when the library has none for ``workload``."""
        return None

    def named_points(self, workload: Workload, hw: Hardware) -> dict[str, dict]:
        """The space's named points: ``default`` and, where there is one, ``library``."""
        named = {"default": self.default(workload, hw)}
        lib = self.library(workload, hw)
        if lib is not None:
            named["library"] = lib
        return named

    def side_point(self, workload: Workload, hw: Hardware, side: str) -> dict | None:
        """A valid point with every engine choice on ``side`` (``pim`` or ``host``),
        closest to the default; None when the family cannot run there."""
        space, default = self.space(workload, hw), self.default(workload, hw)
        if self.on_side(default, side):
            return default
        engines = [p for p in space.params if p.name in self.engine_params]
        if not all(p.domain.contains(side) for p in engines):
            return None
        point = space.fill(lambda p: side if p.name in self.engine_params else
                           default[p.name] if p.name in default else p.domain.values()[0])
        if not space.validate(point):
            return point
        for point in space.enumerate(limit=4096):  # the first valid point on that side
            if self.on_side(point, side) and not space.validate(point):
                return point
        return None

    def on_side(self, point: Mapping[str, Any], side: str) -> bool:
        """Whether every engine choice of ``point`` is ``side``."""
        return all(point[p] == side for p in self.engine_params if p in point)

    # ---- the workload in a step ----------------------------------------------------
    def adapt(self, workload: Workload, *, window: int, capacity: int,
              route: tuple[float, ...] = ()) -> Workload:
        """The workload as a step reserving ``capacity`` cache positions runs it, in a
        layer attending to the last ``window`` positions (0: all) whose router picks its
        experts with probabilities ``route`` (``()``: uniformly)."""
        return workload

    def with_context(self, workload: Workload, context: int) -> Workload:
        """The workload of the same step over ``context`` positions."""
        return workload

    def pin(self, workload: Workload, hw: Hardware, db: Database | None) -> Workload:
        """The workload reading its weights where one-row steps keep them."""
        return workload

    def shard(self, workload: Workload, dims: tuple[str, ...], tp: int) -> Workload:
        """One of ``tp`` tensor-parallel devices' share: ``dims`` divided by ``tp``
        (callers check divisibility)."""
        d = {k: v // tp if k in dims else v for k, v in workload.dims.items()}
        return Workload.make(workload.op, workload.dtype, dict(workload.attrs), **d)

    # ---- memory --------------------------------------------------------------------
    def weight_bytes(self, workload: Workload, hw: Hardware, point: dict | None = None) -> int:
        """Bytes of weight elements the family keeps in the banks (no layout padding),
        under schedule ``point`` where the schedule changes them (None: the workload's
        own)."""
        return 0

    def cache_bytes(self, workload: Workload, hw: Hardware) -> int:
        """Bytes of cached state (keys and values) it keeps in the banks."""
        return 0

    def table_bytes(self, workload: Workload, hw: Hardware) -> int:
        """Bytes of tables the host keeps beside the device (an embedding's rows)."""
        return 0

    def cache_rows(self, workload: Workload, point: dict, batch: int,
                   hw: Hardware) -> int | None:
        """Rows per bank its cache needs at ``batch`` sequences under ``point`` (or the
        default where ``point`` cannot hold them); 0 without a cache, None when no layout
        can hold it."""
        return 0

    #: the memory a step can make denser here when its plan overflows: ``replicas``,
    #: ``cache``, ``weights`` or None (the compiler drops copies of experts, then fits
    #: caches, then weights, then caches again)
    memory_kind: ClassVar[str | None] = None

    def fit_memory(self, step: Any) -> dict[str, Schedule]:
        """Node name -> a denser schedule for this family's nodes of ``step`` (a compiled
        stage whose memory plan overflows) so that it fits; empty when none helps."""
        return {}

    def follow_fit(self, graph: OpGraph, one: Any) -> dict[str, Workload]:
        """Node name -> workload of ``graph`` (a step of several rows) moved to the
        layouts its weights were fitted to in ``one`` (the compiled one-row step)."""
        return {}

    # ---- bound ---------------------------------------------------------------------
    def options(self, workload: Workload, hw: Hardware) -> tuple[Option, ...]:
        """Its placements as resource terms of a step's bound (default: host only)."""
        b = self.bound(workload, hw)
        return (Option(0.0, b, b),)

    # ---- graph ---------------------------------------------------------------------
    def rows(self, workload: Workload) -> int:
        """Rows of its output ``[rows, width]``."""
        return workload.dims["m"]

    def output_width(self, workload: Workload) -> int:
        """Columns of its output ``[rows, width]``."""
        return workload.dims["n"]

    def output_parts(self, graph: OpGraph, node: OpNode) -> dict[str, tuple[int, int]]:
        """Labelled column ranges of ``node``'s output: by default one range, labelled by
        the node's role where a consumer asks for it by label (q, k, v, gate, up)."""
        return {ROLE_LABELS.get(node.role, "out"): (0, self.output_width(node.workload))}

    def operand_names(self, node: OpNode) -> tuple[str, ...]:
        """Its kernel's activation inputs, in the order of ``node.inputs``."""
        return ("x",)

    def reads_whole(self, node: OpNode) -> bool:
        """Whether each input is read whole, whatever parts its producer labels."""
        return False

    def labelled_operands(self, node: OpNode) -> dict[str, tuple[str, ...]] | None:
        """Operands gathered by label from any input (name -> labels to concatenate),
        instead of one input each; None for one input per name (the default)."""
        return None

    def fuse(self, graph: OpGraph, plan: dict) -> OpGraph:
        """``graph`` rewritten by the fusion decisions of ``plan`` this family owns."""
        return graph

    def fuse_weights(self, graph: OpGraph, plan: dict,
                     weights: dict[str, dict[str, Arr]]) -> dict[str, dict[str, Arr]]:
        """The weights (node -> tensor name -> array) of ``fuse(graph, plan)``."""
        return weights

    def unclaimed_op(self, workload: Workload) -> str | None:
        """The key of the model's own op this workload runs because no family covers it
        (None for a family's own work)."""
        return None

    # ---- the frontend ----------------------------------------------------------------
    #: it claims every op no recogniser claims (runs it on the host as the model does)
    claims_leftovers: ClassVar[bool] = False

    def recognisers(self) -> tuple[tuple[int, Callable[..., Any]], ...]:
        """(order, recogniser) pairs: ``recogniser(g, node) -> Match | None`` finds the
        family in a captured ATen graph (``autosched.frontend.match``), anchored at the
        op producing its result. Recognisers run in ``order`` (lower first), each over
        the whole graph before the next, so one that claims a larger structure (attention
        with its cache writes: 10) runs before those of its parts (rotary 20, norms 30,
        linear layers 40, lookups 50 and 60, element-wise ops 70). Imported on use: the
        frontend needs torch, the compiler does not."""
        return ()

    def absorbs(self, g: Any, node: Any, matches: list) -> bool:
        """Whether an op no recogniser claimed belongs to one of ``matches`` of this
        family (a cache write joins its attention); it then adds it to that match."""
        return False

    def finish(self, g: Any, matches: list) -> list:
        """``matches`` after this family's last pass over them (merging the two rotary
        halves of one attention into one operator)."""
        return matches

    def leftover(self, g: Any, node: Any) -> Any:
        """The match running ``node``, an op no family claimed (the family that
        ``claims_leftovers``); None when this family runs no leftovers."""
        return None

    # ---- numbers -------------------------------------------------------------------
    def tensors(self, workload: Workload) -> tuple[str, ...]:
        """Names of the weight tensors :meth:`weights` gives and ``kernel.place`` expects."""
        return ()

    def weights(self, source: Any, node: OpNode) -> dict[str, Arr]:
        """The tensors ``kernel.place`` writes into the banks, read from ``source``."""
        return {}

    def constants(self, source: Any, node: OpNode, positions: Arr) -> dict[str, Arr]:
        """Host constants of ``node`` by kernel buffer name (``positions`` per row)."""
        return {}

    @abc.abstractmethod
    def reference(self, node: OpNode, ops: dict[str, Arr], tensors: dict[str, Arr],
                  env: Any) -> Arr:
        """``node``'s output ``[rows, width]`` in float64 numpy, from its operands ``ops``
        and tensors (weights and constants by kernel name); ``env`` is the evaluator's
        step (positions, caches). The reference evaluator checks lowerings with it."""
