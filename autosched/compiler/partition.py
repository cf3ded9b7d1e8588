"""Partitioning a model over the devices of a system: tensor- and pipeline-parallel.

A :class:`Partition` is ``tp`` devices per stage (tensor-parallel: each holds a slice of
every layer's heads and FFN columns, and of the LM head's vocabulary) and ``pp`` stages
(pipeline-parallel: consecutive layers, as even as possible). Stage ``s`` runs on devices
``s*tp .. s*tp+tp-1``. :func:`shard_graph` rewrites a model step's graph into what one
tensor-parallel device computes; the compiler adds an all-reduce after each attention
output projection and FFN down projection, an all-gather of the logits, and a send of
the residual stream between stages. :func:`candidates` lists the partitions a model
admits on a system; the choice among them is the compiler's search (``system``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from autosched.families import family_of
from autosched.ir import OpGraph, OpNode, PartitionError
from sim.errors import AutoschedError
from sim.hardware import System

__all__ = ["REDUCED", "Partition", "PartitionError", "candidates", "check_placed",
           "shard_graph", "shard_tensors", "stage_of", "tp_reasons"]


# role -> the dims a tensor-parallel device holds 1/tp of
_SPLIT: dict[str, tuple[str, ...]] = {
    "q_proj": ("n",), "k_proj": ("n",), "v_proj": ("n",), "qkv_proj": ("n",),
    "o_proj": ("k",), "ffn_gate": ("n",), "ffn_up": ("n",), "gate_up": ("n",),
    "ffn_down": ("k",), "ffn_silu": ("n",), "ffn_mul": ("n",), "lm_head": ("n",),
    "qk_rotary": ("h",), "rotary": ("h",), "attn": ("h", "kvh"),
    "experts": ("e",),  # expert parallelism: each device runs its share of the experts
    "q_norm": ("m",), "k_norm": ("m",),  # per-head norms: each device's heads' rows
}
# partial sums: all-reduced over the stage's devices
REDUCED = ("o_proj", "ffn_down", "experts")


@dataclass(frozen=True)
class Partition:
    """``tp`` devices per stage, ``stages[s]`` = (first layer, end layer) of stage s."""

    tp: int
    stages: tuple[tuple[int, int], ...]
    experts: bool = False  # the tp devices split the experts only (expert parallelism)

    @property
    def pp(self) -> int:
        return len(self.stages)

    @property
    def devices(self) -> int:
        return self.tp * self.pp

    @classmethod
    def single(cls, layers: int) -> Partition:
        """One device: every layer in one stage."""
        return cls(1, ((0, layers),))

    @classmethod
    def even(cls, tp: int, pp: int, layers: int, experts: bool = False) -> Partition:
        """``pp`` stages of consecutive layers differing by at most one layer."""
        cuts = [round(i * layers / pp) for i in range(pp + 1)]
        return cls(tp, tuple(zip(cuts[:-1], cuts[1:], strict=True)), experts)

    @property
    def roles(self) -> frozenset[str]:
        """The roles its devices split (the rest each device computes whole)."""
        return frozenset(("experts",) if self.experts else _SPLIT)

    def devices_of(self, stage: int) -> tuple[int, ...]:
        return tuple(range(stage * self.tp, (stage + 1) * self.tp))

    def describe(self) -> str:
        what = "ep" if self.experts else "tp"
        return f"{what}={self.tp} pp={self.pp} ({self.devices} devices)"

    def to_dict(self) -> dict:
        return {"tp": self.tp, "pp": self.pp, "stages": [list(s) for s in self.stages],
                **({"experts": True} if self.experts else {})}


def tp_reasons(cfg: Any, tp: int, experts: bool = False) -> list[str]:
    """Why ``cfg`` cannot be split over ``tp`` devices (empty: it can); ``experts``:
    only its experts are split."""
    if experts:
        e = cfg.experts
        return [] if e and e % tp == 0 else [f"experts={e} is not a multiple of ep={tp}"]
    why = []
    for what, v in (("heads", cfg.heads), ("kv_heads", cfg.kv_heads),
                    ("intermediate", cfg.intermediate), ("vocab", cfg.vocab)):
        if v % tp:
            why.append(f"{what}={v} is not a multiple of tp={tp}")
    return why


def candidates(cfg: Any, system: System) -> list[Partition]:
    """Every (tp, pp) with tp * pp <= devices that splits ``cfg`` evenly, pp <= layers."""
    out = []
    for tp in range(1, system.devices + 1):
        for ep in (False, True) if tp > 1 else (False,):
            if tp_reasons(cfg, tp, ep):
                continue
            for pp in range(1, system.devices // tp + 1):
                if pp <= cfg.layers:
                    out.append(Partition.even(tp, pp, cfg.layers, ep))
    return out


def _scaled(n: OpNode, dims: tuple[str, ...], tp: int):
    w = n.workload
    for k in dims:
        if w.dims[k] % tp:
            raise AutoschedError(f"{n.name}: {k}={w.dims[k]} of {w.key} does not split over "
                                 f"tp={tp}")
    try:
        return family_of(w).shard(w, dims, tp)
    except PartitionError as e:  # the family cannot split it: say which node
        raise PartitionError(f"{n.name}: {e}") from e


def _check_head_norm(graph: OpGraph, n: OpNode) -> None:
    """A q/k norm splits with the heads only when it normalises each head alone with one
    weight for all heads; a norm over the whole projection (OLMo 2, OLMoE) would need the
    other devices' heads, and per-head weights are not sharded."""
    attn = next((a for a in graph.nodes if a.layer == n.layer and a.role == "attn"), None)
    head = attn is not None and n.workload.dims.get("n") == attn.workload.dims.get("d")
    if not head or n.workload.attr("heads"):
        raise PartitionError(f"{n.name}: a {'per-head-weighted' if head else 'whole-width'} "
                             f"{n.role} does not split over tensor-parallel devices; use a "
                             "pipeline partition (1xP) or expert parallelism")


def check_placed(graph: OpGraph, part: Partition) -> None:
    """Refuse a partition of several devices when a linear has no decoder role (a
    structure ``frontend.roles`` did not recognise): such a step is compiled for one
    device only, since splitting or staging what the roles do not name is not known to
    compute the model (StableLM's per-head norm list, before its pattern, did not)."""
    if part.devices == 1:
        return
    for n in graph.nodes:
        if n.role == "linear":
            raise PartitionError(f"{n.name}: a linear outside the decoder structure the "
                                 f"partitioner knows ({n.workload.key}); this model "
                                 f"compiles for one device only, not {part.describe()}")


def shard_graph(graph: OpGraph, tp: int, roles: frozenset[str] | None = None) -> OpGraph:
    """What each of ``tp`` tensor-parallel devices computes (all layers; the stage slices
    them), splitting the nodes of ``roles`` (default: every role tensor parallelism
    splits). Residual additions must not be fused into the reduced projections."""
    if tp == 1:
        return graph
    roles = frozenset(_SPLIT) if roles is None else roles
    nodes = []
    for n in graph.nodes:
        w = n.workload
        if n.role not in roles:
            nodes.append(n)
            continue
        if n.role in REDUCED and "r" in family_of(w).operand_names(n):  # adds a residual
            raise AutoschedError(f"{n.name}: a residual fused into {n.role} would be added on "
                                 "every tensor-parallel device; compile without "
                                 "residual_epilogue")
        if n.role == "lm_head" and "token" in family_of(w).output_parts(graph, n):
            raise AutoschedError(f"{n.name}: an argmax fused into the LM head would see one "
                                 "device's slice of the vocabulary; compile without "
                                 "argmax_epilogue")
        if n.role in ("q_norm", "k_norm"):
            _check_head_norm(graph, n)
        if n.role in _SPLIT:
            w = _scaled(n, _SPLIT[n.role], tp)
        nodes.append(dataclasses.replace(n, workload=w))
    return dataclasses.replace(graph, nodes=tuple(nodes))


def stage_of(graph: OpGraph, part: Partition) -> dict[str, int]:
    """The stage of every node: its layer's stage, or a later one where one of its inputs
    is computed (a stage only receives from earlier stages); a node of no layer, the
    latest stage of its inputs (stage 0 for none): the embedding before the layers, the
    final norm and LM head after them, and an operator the roles did not place in a layer
    where its inputs are."""
    out: dict[str, int] = {}
    for n in graph:
        after = max((out[i] for i in n.inputs if i in out), default=0)
        if n.layer is None:
            out[n.name] = after
            continue
        own = next(s for s, (a, b) in enumerate(part.stages) if a <= n.layer < b)
        out[n.name] = max(own, after)
    return out


def _parts(cfg: Any, role: str) -> list[int] | None:
    """Row blocks of a role's weight that split separately (None: split the columns)."""
    q, kv, inter = cfg.q_dim, cfg.kv_dim, cfg.intermediate
    return {"q_proj": [q], "k_proj": [kv], "v_proj": [kv], "qkv_proj": [q, kv, kv],
            "ffn_gate": [inter], "ffn_up": [inter], "gate_up": [inter, inter],
            "lm_head": [cfg.vocab]}.get(role)


def shard_tensors(step: Any, node: OpNode, tensors: dict[str, np.ndarray], tp: int,
                  rank: int, roles: frozenset[str] | None = None) -> dict[str, np.ndarray]:
    """Device ``rank`` of ``tp``'s share of a node's weights ``W`` and bias ``b``: the
    rows of each output block (q | k | v, gate | up, vocabulary) or, for the reduced
    projections, the columns; everything else whole. ``step``: the model's step (its
    config sizes the blocks)."""
    if tp == 1 or roles is not None and node.role not in roles:
        return tensors
    out = dict(tensors)
    if node.role == "experts":  # stacked experts: this device's block of them, and
        for name, t in tensors.items():  # the whole stack, for the replicas of hot ones
            if np.ndim(t) == 3:
                c = t.shape[0] // tp
                out[name] = np.asarray(t)[rank * c:(rank + 1) * c]
                out[f"{name}@all"] = t
        return out
    parts = _parts(step.model, node.role)
    for name in ("W", "b"):
        if name not in tensors:
            continue
        t = np.asarray(tensors[name])
        if node.role in REDUCED and name == "W":
            c = t.shape[1] // tp
            out[name] = t[:, rank * c:(rank + 1) * c]
        elif parts is not None:
            blocks, at = [], 0
            for p in parts:
                c = p // tp
                blocks.append(t[at + rank * c:at + (rank + 1) * c])
                at += p
            out[name] = np.concatenate(blocks, axis=0)
    return out
