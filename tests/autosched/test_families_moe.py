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


def test_replicated_hot_experts_sum_to_the_mixture_and_relieve_the_busiest_device() -> None:
    """Four devices share eight experts under skewed routing: with the hottest ones copied
    onto every device (``replicas``) the devices' outputs still sum to the mixture, every
    device's program stays above the bound, and the busiest device's step shortens."""
    from autosched.families.moe.routing import encode
    from sim.functional import DeviceMemory, execute

    hw = load_hardware("hbm-pim")
    e, ep, m = 8, 4, 6
    probs = 1 / np.arange(1, e + 1) ** 1.2
    attrs = {"act": "silu", "norm": 1, "shared": 0, "route": encode(probs / probs.sum())}
    whole = Workload.make("moe", hw.pim.dtype, attrs, m=m, n=64, i=32, e=e, k=2, s=1)
    w = Workload.make("moe", hw.pim.dtype, {**attrs, "ep": ep}, m=m, n=64, i=32, e=e, k=2,
                      s=1)
    assert "replicas" not in {p.name for p in space_of(whole, hw).params}
    rng = np.random.default_rng(2)
    t = {"head": rng.normal(size=(e, 64)) * 0.5, "gate_up": rng.normal(size=(e, 64, 64)) * 0.1,
         "down": rng.normal(size=(e, 64, 32)) * 0.1}
    t = {k: v.astype(np.float32) for k, v in t.items()}
    x = rng.normal(size=(m, 64)).astype(np.float32)
    fam = MoeFamily()
    ref = fam.reference(_Node(whole), {"x": x}, t, None)
    bound = fam.bound(w, hw)
    ns = {}
    for r in (0, 1, 2):
        point = {"placement": "pim", "tile": 1, "split": "all", "replicas": r}
        space_of(w, hw).check(point)
        kern = build(w, point, hw)
        total = np.zeros_like(ref)
        for d in range(ep):  # device d: its block of experts, and the whole stack
            mine = {"head": t["head"], "gate_up": t["gate_up"][2 * d:2 * d + 2],
                    "down": t["down"][2 * d:2 * d + 2], "gate_up@all": t["gate_up"],
                    "down@all": t["down"], "x": x}
            mem = DeviceMemory(hw)
            kern.place(mem, mine)
            out = execute(kern.program, hw, mem, inputs=kern.bind(mine), position=d)
            total += out[kern.output].reshape(kern.output_shape)
        assert np.abs(total - ref).max() <= 0.02 * np.abs(ref).max(), r
        ns[r] = simulate(kern.program, hw).latency_ns
        assert ns[r] >= bound, r
        assert fam.weight_bytes(w, hw, point) == fam.weight_bytes(w, hw) + r * 3 * 32 * 64 * 2
    assert ns[1] < 0.8 * ns[0], ns


def test_replicated_experts_placed_by_the_compiler_match_transformers(tmp_path) -> None:
    """Through the compiler: each device's slots for the four replicated experts (half of
    them, so that the tokens' routing reaches some) are written from the whole stack,
    its own copies of them go unused, and the four
    devices' summed outputs still generate the tokens ``transformers`` does."""
    from autosched.compiler import compile_step
    from autosched.compiler.partition import Partition
    from autosched.compiler.run import run_check
    from autosched.frontend.source import load_source
    from autosched.ir import Step
    from experiments.archs import tiny_checkpoint
    from search_spaces import Schedule
    from sim.system import load_system

    folder = tiny_checkpoint("qwen3_moe", tmp_path / "q")
    system = load_system("experiments/configs/hbm-pim-x4.yaml")
    cfg = load_source(str(folder), dtype=system.device.pim.dtype).cfg
    part = Partition.even(4, 1, cfg.layers, experts=True)
    first = compile_step(Step(cfg, "decode", 1, 2), system, partition=part, db=None)
    given = {}
    for name, c in first.choices.items():
        if c.workload.op == "moe":
            space = space_of(c.workload, system.device)
            given[name] = Schedule.of(space, {**c.schedule.point, "replicas": 4})
    assert len(given) == cfg.layers
    rep = run_check(str(folder), system, partition=part, steps=4, schedules=given)
    assert rep.passed and rep.tokens_match, rep


def test_a_stage_that_overflows_drops_the_replicas_first() -> None:
    """Replicas the database would choose but the device cannot hold are dropped when the
    stage is fitted: the fitted schedules copy no experts."""
    from types import SimpleNamespace

    from autosched.lookup import LookupKind, LookupResult
    from search_spaces import Schedule

    hw = load_hardware("hbm-pim")
    w = Workload.make("moe", hw.pim.dtype, {"act": "silu", "ep": 4}, m=2, n=64, i=32, e=8,
                      k=2, s=1)
    space = space_of(w, hw)
    tuned = {"placement": "pim", "tile": 1, "split": "all", "replicas": 2}
    given = {"placement": "pim", "tile": 2, "split": "all", "replicas": 4}
    st = SimpleNamespace(hw=hw, choices={
        "a": LookupResult(LookupKind.EXACT, w, Schedule.of(space, tuned)),
        "b": LookupResult(LookupKind.GIVEN, w, Schedule.of(space, given))})
    fitted = MoeFamily().fit_memory(st)
    assert fitted == {"a": Schedule.of(space, {**tuned, "replicas": 0})}


def test_the_replica_slots_hold_every_row_once_and_count_as_laid_out() -> None:
    """Random routings: summed over devices the slots are the routing, and the rows each
    slot is expected to receive are the rows ``device_slots`` gives it."""
    from autosched.families.moe.replicas import device_slots, hot, slot_rows

    rng = np.random.default_rng(3)
    for _ in range(20):
        e, ep, m = 8, int(rng.choice([2, 4, 8])), int(rng.integers(1, 12))
        weights = np.where(rng.random((e, m)) < 0.3, rng.random((e, m)), 0.0)
        reps = hot(weights.sum(axis=1), int(rng.integers(0, 5)))
        slots = device_slots(weights, reps, ep)
        local = e // ep
        summed = slots[:, :local].reshape(e, m).copy()
        for r, j in enumerate(reps):
            summed[j] += slots[:, local + r].sum(axis=0)
        assert np.allclose(summed, weights)
        assert (slot_rows((weights != 0).sum(axis=1), reps, ep) == (slots != 0).sum(axis=2)).all()
