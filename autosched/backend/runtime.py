"""One compiled Dynamo graph: each call runs its PIM part on the functional simulator.

Per call: the position-only part of the graph (masks, rotary tables, cache indices and
counters) runs eagerly; each attention's context and window are read from the call's
mask and positions and checked against what the attention kernel computes (a causal
mask, possibly a sliding window; anything else runs the call eagerly); the step's
program is compiled (schedules of the first call kept, so the cache layout never moves),
keys and values the banks do not hold yet are loaded from the ``transformers`` cache,
the program executes on simulated memory that keeps weights and cache between calls,
and the graph's own cache writes and outputs are then done with the program's values.
The cycle-level latency of every call is recorded (:mod:`.report`).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from autosched.compiler import compile_step
from autosched.database import Database
from autosched.families import family_of
from autosched.families.attention.cache import load_cache
from autosched.frontend.aten import replay_aliases
from autosched.frontend.checkpoint import Weights
from autosched.frontend.config import ModelError
from autosched.frontend.match import Kind
from autosched.fusion import output_width
from autosched.ir import OpGraph
from search_spaces import Workload
from search_spaces.attention import attention_layout_of, capacity_of
from sim.functional import DeviceMemory, execute_system
from sim.hardware import System
from sim.timing import simulate_system

from .graph import StepGraph
from .report import CallRecord, GraphReport

__all__ = ["CompiledGraph"]


class _CallWeights(Weights):
    """Parameters of the call by placeholder name; rotary tables of the call by rope
    (``[rows, d]``, one row per token of every sequence)."""

    def __init__(self, tensors: dict[str, torch.Tensor], tables: dict[str, tuple],
                 rows: int) -> None:
        super().__init__()
        self.tensors, self.rows = tensors, rows
        self.tables = {k: tuple(self._rows(t) for t in v) for k, v in tables.items()}

    def _rows(self, t: torch.Tensor) -> torch.Tensor:
        t = t.float().reshape(-1, t.shape[-1])
        return t.repeat(self.rows // t.shape[0], 1) if t.shape[0] < self.rows else t

    def tensor(self, name: str) -> torch.Tensor | None:
        return self.tensors.get(name)

    def module(self, path: str):
        cos, sin = self.tables[path]
        return lambda x, pos: (cos, sin)


def _visible(mask: torch.Tensor) -> torch.Tensor:
    if mask.dtype == torch.bool:
        return mask
    return mask > torch.finfo(mask.dtype).min / 2


class CompiledGraph:
    """Callable replacing one Dynamo graph (see the module docstring)."""

    def __init__(self, sg: StepGraph, eager: object, system: System, db: Database | None,
                 report: GraphReport) -> None:
        self.sg, self.eager, self.db, self.report = sg, eager, db, report
        self.system, self.hw = system, system.device
        self.skip = set().union(*(m.nodes - m.extra.get("writes", set()) - {m.out}
                                  for m in sg.matches))
        self.mem = DeviceMemory(self.hw)
        self.schedules: dict | None = None
        self.placed = False
        self.loaded: dict[str, int] = {}

    def _static(self, args: tuple) -> dict:
        env = dict(self.sg.constants)
        env.update(zip(self.sg.inputs, args, strict=True))
        for n in self.sg.g.graph.nodes:
            if n.op == "call_function" and n not in self.sg.g.active:
                env[n] = n.target(*torch.fx.node.map_arg(n.args, env.__getitem__),
                                  **torch.fx.node.map_arg(n.kwargs, env.__getitem__))
        return env

    def _attention(self, m, node, env: dict, pos: np.ndarray) -> tuple[Workload, int, str]:
        """The call's attention workload, the cache length, or why the kernel cannot do it."""
        q, w = self.sg.tokens, node.workload
        n, kv_len = int(pos.max()) + 1, int(m.extra["kv_len"])
        want = np.minimum(pos + 1, n)
        mask = m.extra["mask"]
        if mask is not None:
            vis = _visible(env[mask])
            vis = vis.reshape((1,) * (4 - vis.dim()) + tuple(vis.shape))[:, :1]
            vis = vis.expand(self.sg.batch, 1, q, kv_len)
            seen = vis.sum(-1).numpy().reshape(self.sg.batch, q)
        elif m.extra["causal"] or q == 1:
            seen = np.broadcast_to(np.minimum(pos + 1, kv_len), (self.sg.batch, q))
        else:
            return w, kv_len, "attention without a causal mask"
        window = int(seen.max()) if (seen < want).any() else 0
        if not (seen == np.minimum(want, window or n)).all():
            return w, kv_len, "attention mask is neither causal nor a sliding window"
        if window == 0 and n > kv_len:
            window = kv_len
        fam = family_of(w)
        w = fam.with_context(fam.adapt(w, window=window, capacity=max(kv_len, n)), n)
        return w, kv_len, ""

    def _graph(self, env: dict, pos: np.ndarray) -> tuple[OpGraph | None, str]:
        nodes = []
        for m, n in zip(self.sg.matches, self.sg.nodes, strict=True):
            if m.kind is Kind.ATTENTION:
                w, _, why = self._attention(m, n, env, pos)
                if why:
                    return None, why
                n = dataclasses.replace(n, workload=w)
            nodes.append(n)
        phase = "decode" if self.sg.tokens == 1 else "prefill"
        return OpGraph(tuple(nodes), phase, self.report.name, self.sg.batch, self.sg.tokens,
                       int(pos.max()) + 1), ""

    def _sync_cache(self, cm, env: dict, pos: np.ndarray) -> None:
        """Load the positions before this step the banks do not hold yet."""
        first = int(pos.min())
        for m, n in zip(self.sg.matches, self.sg.nodes, strict=True):
            if m.kind is not Kind.ATTENTION:
                continue
            w = cm.graph.node(n.name).workload
            pl = attention_layout_of(w.dims, capacity_of(w), cm.choices[n.name].schedule.point,
                                self.hw, int(w.attr("window", 0)))
            done = self.loaded.get(n.name, 0)
            if done > first:
                done = 0  # a new sequence
            need = list(range(max(done, first - pl.span), first))
            if need:
                kc, vc = env[m.extra["k_cache"]], env[m.extra["v_cache"]]
                shift = max(0, first - kc.shape[2])  # the cache holds the last positions
                sl = [p - shift for p in need]
                load_cache(pl, self.mem, cm.linked.rows.get(n.name, (0, 0))[0],
                           kc[:, :, sl].float().numpy(), vc[:, :, sl].float().numpy(), need)
            self.loaded[n.name] = first + self.sg.tokens

    def _values(self, cm, out: dict, env: dict) -> None:
        """The graph's own cache writes and outputs, with the program's values."""
        homes = {f.tag: f.binds[0][1:] for f in cm.linked.fragments}
        g = self.sg.g
        for n in g.graph.nodes:
            if n.op != "call_function" or n not in g.active or n in env or n in self.skip:
                continue
            m = self.sg.match_of(n)
            if m is not None and m.kind is Kind.ROTARY:
                half = "q" if n is m.extra.get("q_out") else "k"
                x = m.extra[f"{half}_x"]
                node = cm.graph.node(self.sg.nodes[self.sg.matches.index(m)].name)
                buf, off = homes[node.name]
                rows = node.workload.dims["m"]
                full = out[buf][off: off + rows * output_width(node.workload)].reshape(rows, -1)
                lo = 0 if half == "q" else full.shape[1] - int(np.prod(g.shape(g.root(x)))) // rows
                hi = lo + int(np.prod(g.shape(g.root(x)))) // rows
                lin = torch.from_numpy(full[:, lo:hi].copy()).reshape(g.shape(g.root(x)))
                env[n] = replay_aliases(g.chain(x), lin).to(g.dtype(n))
            elif m is not None and m.out is n and m.kind is not Kind.ATTENTION:
                node = self.sg.nodes[self.sg.matches.index(m)]
                buf, off = homes[node.name]
                size = int(np.prod(g.shape(n)))
                val = out[buf][off: off + size] if size else out[buf]
                env[n] = torch.from_numpy(np.ascontiguousarray(val)).reshape(g.shape(n)) \
                    .to(g.dtype(n))
            elif all(a in env for a in n.all_input_nodes):
                env[n] = n.target(*torch.fx.node.map_arg(n.args, env.__getitem__),
                                  **torch.fx.node.map_arg(n.kwargs, env.__getitem__))

    def __call__(self, *args: torch.Tensor) -> tuple:
        with torch.no_grad():
            return self._call(args)

    def _call(self, args: tuple) -> tuple:
        env = self._static(args)
        pos = env[self.sg.positions].reshape(self.sg.batch, -1)[0].numpy().astype(np.int64)
        graph, why = self._graph(env, pos)
        if graph is None:
            self.report.calls.append(CallRecord(self.sg.tokens, int(pos.max()) + 1,
                                                float("nan"), why))
            return self.eager(*args)
        cs = compile_step(None, self.system, db=self.db if self.schedules is None else None,
                          graph=graph, schedules=self.schedules, keep_outputs=True)
        cm = cs.stages[0]
        if self.schedules is None:
            self.schedules = {k: c.schedule for k, c in cm.choices.items()}
            self.report.lookups = cm.lookup_counts()
        tensors = {f"arg{i}": a for i, a in enumerate(args)}
        tables = {m.extra["rotary"]: (env[m.extra["cos"]], env[m.extra["sin"]])
                  for m in self.sg.matches if m.kind is Kind.ROTARY}
        weights = _CallWeights(tensors, tables, self.sg.batch * self.sg.tokens)
        if not self.placed:
            cs.place({0: self.mem}, weights)
            self.placed = True
        self._sync_cache(cm, env, pos)
        out = execute_system(cs.program, self.system, {0: self.mem},
                             cs.inputs(weights, env[self.sg.ids].numpy(), pos))[0]
        self._values(cm, out, env)
        lat = simulate_system(cs.program, self.system).latency_ns
        self.report.calls.append(CallRecord(self.sg.tokens, int(pos.max()) + 1, lat, ""))
        result = next(n for n in self.sg.g.graph.nodes if n.op == "output").args[0]
        try:
            return tuple(torch.fx.node.map_arg(result, env.__getitem__))
        except KeyError as e:
            raise ModelError(f"the graph output {e} was not computed") from e
