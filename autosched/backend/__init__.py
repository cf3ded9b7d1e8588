"""The ``torch.compile`` backend: ``torch.compile(model, backend="autosched")``.

Registered under the ``torch_dynamo_backends`` entry point, so the string works once
autosched is installed. Options (``torch.compile(..., options={...})``): ``hw`` (a preset
name, YAML file or Hardware; default ``hbm-pim``) and ``db`` (a tuned-schedule database;
default: each family's default schedule). Each graph Dynamo hands over is exported to
ATen and matched to operators like a captured model; its PIM part runs on the
functional simulator with the database's schedules and everything else eagerly
(:mod:`.runtime`). :func:`reports` tells, per graph, which ops ran on the host, why a
graph ran eagerly, and the simulated latency of every call.
"""

from __future__ import annotations

from typing import Any

import torch

from autosched.database import open_database
from sim.system import load_system

from .report import CallRecord, GraphReport, clear_reports, reports

__all__ = ["CallRecord", "GraphReport", "autosched_backend", "clear_reports", "reports"]

_OPTIONS = ("hw", "db")


def autosched_backend(gm: torch.fx.GraphModule, example_inputs: list,
                      options: dict[str, Any] | None = None) -> Any:
    """Dynamo backend: a callable running ``gm`` with its PIM part on the simulator."""
    from autosched.frontend.config import ModelError
    from autosched.frontend.match import Kind

    from .graph import trace
    from .report import new_report
    from .runtime import CompiledGraph

    options = dict(options or {})
    unknown = sorted(set(options) - set(_OPTIONS))
    if unknown:
        raise ModelError(f"unknown autosched backend option(s) {', '.join(unknown)}; "
                         f"use {', '.join(_OPTIONS)}")
    system = load_system(options.get("hw", "hbm-pim"))
    db = options.get("db")
    database = open_database(db) if db is not None and not hasattr(db, "best") else db
    report = new_report(f"graph{len(reports())}", system.name)
    try:
        sg = trace(gm, example_inputs)
    except ModelError as e:
        report.eager = str(e)
        return gm.forward
    report.operators = len(sg.nodes)
    report.host_ops = tuple(sorted({m.extra["op"] for m in sg.matches if m.kind is Kind.OP}))
    return CompiledGraph(sg, gm.forward, system, database, report)
