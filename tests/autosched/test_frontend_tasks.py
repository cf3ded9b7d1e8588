"""Operator graph invariants and JSON, and deduplication into tasks."""

from __future__ import annotations

import json

import pytest

from autosched.frontend import ModelError, capture
from autosched.ir import OpGraph, OpNode, Task, tasks
from search_spaces.workload import Workload

W1 = Workload.make("gemv", m=1, n=64, k=64)
W2 = Workload.make("elementwise", attrs={"fn": "add"}, m=1, n=64)


def test_graph_validates_order_names_and_phase() -> None:
    a, b = OpNode("a", W1), OpNode("b", W2, ("a",), 0, "attn_residual")
    assert OpGraph((a, b), "decode").node("b").role == "attn_residual"
    with pytest.raises(ModelError, match="topological"):
        OpGraph((b, a), "decode")
    with pytest.raises(ModelError, match="two nodes"):
        OpGraph((a, a), "decode")
    with pytest.raises(ModelError, match="phase"):
        OpGraph((a,), "training")
    with pytest.raises(ModelError, match="no node named"):
        OpGraph((a,), "decode").node("z")


def test_graph_json_round_trip() -> None:
    g = OpGraph((OpNode("a", W1, (), None, "lm_head"), OpNode("b", W2, ("a",), 3, "x")),
                "prefill", "toy", 2, 16, 16)
    d = json.loads(g.to_json())
    assert d["phase"] == "prefill" and d["nodes"][1]["workload"]["attrs"] == {"fn": "add"}
    assert OpGraph.from_json(g.to_json()) == g


def test_tasks_count_and_order() -> None:
    g = OpGraph((OpNode("a", W1, (), 0, "q_proj"), OpNode("b", W2, ("a",), 0, "res"),
                 OpNode("c", W1, ("b",), 0, "o_proj"), OpNode("d", W1, ("c",), 1, "q_proj")),
                "decode")
    ts = tasks(g)
    assert [(t.key, t.count, t.roles) for t in ts] == [
        (W1.key, 3, ("q_proj", "o_proj")), (W2.key, 1, ("res",))]
    assert Task.from_dict(json.loads(json.dumps(ts[0].to_dict()))) == ts[0]


def test_tiny_decode_tasks() -> None:
    g = capture("llama-tiny", context=64)
    ts = tasks(g)
    assert sum(t.count for t in ts) == len(g) == 64
    assert len({t.key for t in ts}) == len(ts)
    by = {t.key: t for t in ts}
    qo = by["gemv:m=1,n=256,k=256:fp16"]
    assert qo.count == 8 and qo.roles == ("q_proj", "o_proj")
    assert by["gemv:m=1,n=128,k=256:fp16"].count == 8
    assert by["gemv:m=1,n=688,k=256:fp16"].count == 8
    assert by["attention:b=1,q=1,h=8,kvh=4,d=32,l=64:fp16"].count == 4
    assert by["rmsnorm:m=1,n=256:fp16:eps=1e-05"].count == 9  # eps as the module has it
    assert by["elementwise:m=1,n=256:fp16:fn=add"].count == 8
    assert [t.key for t in tasks(capture("llama-tiny", context=64))] == [t.key for t in ts]
