"""The moe family: every point of its space computes the mixture the reference does and
is never faster than the bound; the expected path spreads experts over devices and
groups; experts split over four devices check against ``transformers``, and the routing
their run records drives ``simulate --routing`` (the file itself: test_frontend_routed)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from autosched.families.moe import MoeFamily, active_path
from autosched.families.moe.routing import expected_rows
from autosched.families.registry import build, space_of
from search_spaces import Workload
from sim.hwio import load_hardware
from sim.isa import HostOp
from sim.program import walk
from sim.timing.engine import simulate


class _Node:
    def __init__(self, w: Workload) -> None:
        self.workload = w


@pytest.mark.parametrize("hw_name", ["hbm-pim", "aim-gddr6"])
def test_every_point_matches_the_reference_and_respects_the_bound(hw_name: str) -> None:
    hw = load_hardware(hw_name)
    dt = hw.pim.dtype
    w = Workload.make("moe", dt, {"act": "silu", "norm": 1, "shared": 1}, m=3, n=64, i=32,
                      e=4, k=2, s=48)
    rng = np.random.default_rng(0)
    t = {"head": rng.normal(size=(4 + 1 + 96, 64)) * 0.1, "gate_up": rng.normal(
        size=(4, 64, 64)) * 0.1, "down": rng.normal(size=(4, 64, 32)) * 0.1,
         "sdown": rng.normal(size=(64, 48)) * 0.1}
    t = {k: v.astype(np.float32) for k, v in t.items()}
    x = rng.normal(size=(3, 64)).astype(np.float32)
    fam = MoeFamily()
    ref = fam.reference(_Node(w), {"x": x}, t, None)
    bound = fam.bound(w, hw)
    points = list(space_of(w, hw).enumerate())
    assert {p["placement"] for p in points} == {"pim", "host"}
    assert any(p["split"] == "groups" for p in points)
    for point in points:
        kern = build(w, point, hw)
        y = kern.run(hw, {**t, "x": x})
        assert np.abs(y - ref).max() <= 0.02 * np.abs(ref).max(), point
        assert simulate(kern.program, hw).latency_ns >= bound, point


def test_the_expected_path_spreads_and_counts_rows() -> None:
    uniform = np.full(128, 1 / 128)
    rows = expected_rows(1, 8, uniform, 4)
    assert rows.sum() == 8 and all(rows[d * 32:(d + 1) * 32].sum() == 2 for d in range(4))
    assert expected_rows(64, 2, np.full(8, 1 / 8)).tolist() == [16] * 8
    skew = np.array([0.7, 0.1, 0.1, 0.1])
    assert expected_rows(4, 2, skew).tolist() == [4, 2, 1, 1]  # none above m
    w = Workload.make("moe", "fp16", {"ep": 2}, m=1, n=64, i=32, e=8, k=2, s=1)
    assert active_path(w)[:4].sum() == 1


def test_experts_split_over_four_devices_match_transformers_and_record_their_routing(
        tmp_path, capsys) -> None:
    """The run also records its routing (``--record-routing``), which ``simulate
    --routing`` then times: the moe workloads carry each layer's probabilities."""
    from autosched.cli import main
    from experiments.archs import tiny_checkpoint

    folder = tiny_checkpoint("qwen2_moe", tmp_path / "q")
    routing = tmp_path / "routing.json"
    assert main(["run", "--model", str(folder), "--hw", "experiments/configs/aim-gddr6-x4.yaml",
                 "--partition", "ep4x1", "--check", "--steps", "3", "--db", "none",
                 "--json", "--record-routing", str(routing)]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["passed"] and rep["tokens_match"], rep
    data = json.loads(routing.read_text())
    assert data["experts"] == 4 and data["layers"] == [1] and data["tokens"] == 3  # 0: dense
    assert all(abs(sum(p) - 1) < 1e-9 for p in data["probs"])
    assert main(["simulate", "--model", str(folder), "--db", "none", "--batch", "4",
                 "--routing", str(routing), "--json"]) == 0
    ops = json.loads(capsys.readouterr().out)["ops"]
    routes = {r["workload"].split("route=")[1].split(",")[0] for r in ops if r["op"] == "moe"}
    assert routes == {"/".join(f"{p:.4g}" for p in row) for row in data["probs"]}
    assert main(["run", "--model", "llama-tiny", "--steps", "2", "--db", "none",
                 "--record-routing", str(tmp_path / "dense.json")]) == 2
    assert "no routed experts" in capsys.readouterr().err


def _host_ops(body: tuple) -> list[HostOp]:
    """The host ops of ``body`` in program order."""
    ops: list[HostOp] = []
    walk(body, lambda ins, _n: ops.append(ins) if isinstance(ins, HostOp) else None)
    return ops


def test_one_row_routes_in_one_op_and_activates_in_the_reduction() -> None:
    """At one row the experts read the row in place (no gather), one host op writes the
    weights and trips, and the gate|up reduction applies silu(gate) * up itself; every
    point still computes the reference."""
    hw = load_hardware("hbm-pim")
    w = Workload.make("moe", hw.pim.dtype, {"act": "silu", "norm": 0, "shared": 0}, m=1,
                      n=64, i=32, e=8, k=2, s=1)
    rng = np.random.default_rng(1)
    t = {"head": rng.normal(size=(8, 64)) * 0.3, "gate_up": rng.normal(size=(8, 64, 64)) * 0.1,
         "down": rng.normal(size=(8, 64, 32)) * 0.1}
    t = {k: v.astype(np.float32) for k, v in t.items()}
    x = rng.normal(size=(1, 64)).astype(np.float32)
    fam = MoeFamily()
    ref = fam.reference(_Node(w), {"x": x}, t, None)
    for point in space_of(w, hw).enumerate():
        kern = build(w, point, hw)
        assert np.abs(kern.run(hw, {**t, "x": x}) - ref).max() <= 0.02 * np.abs(ref).max()
        host = next(s for s in kern.program.streams if s.engine == "host")
        ops = _host_ops(host.body)
        fns = [str(op.attr("fn")).split(".")[0] for op in ops if op.kind == "extern"]
        assert fns == ["moe_select", "moe_combine"], (point, fns)
        if point["placement"] == "pim":
            assert {op.attr("epi") for op in ops if op.attr("epi")} == {"silu_mul"}, point
