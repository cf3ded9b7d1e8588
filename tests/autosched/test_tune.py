"""The tune pipeline wired to test doubles: a one-parameter lowering for every family, a
search that measures points in order and commits each, and a compiler whose end-to-end
latency is the sum of looked-up latencies. The doubles are shared with the CLI tests."""

from __future__ import annotations

import json
import math
import sys
import types
from dataclasses import dataclass

import pytest

import autosched.compiler as real_compiler  # its graph building is kept under the fakes
import autosched.search.shared as shared  # the real job sharing, kept under the fake search
from autosched import tune as tune_mod
from autosched.database import open_database
from autosched.families import Family
from autosched.families import registry as registry_mod
from autosched.frontend import ModelConfig, capture
from autosched.ir import tasks
from autosched.lookup import lookup
from autosched.measure.record import Measurement
from autosched.pipeline import model_graph
from autosched.search.context import SearchContext
from autosched.tune import fusion_plans, tune
from search_spaces import FAMILIES, IntRange, Param, Schedule, Space, Workload
from search_spaces.fusion import FULL_FUSION
from sim import SIM_VERSION
from sim.hwio import load_hardware

TINY = ModelConfig(model_type="llama", hidden=64, intermediate=128, layers=1, heads=4,
                   kv_heads=2, head_dim=16, vocab=256, max_positions=256, name="tiny-test")
POINTS = 4  # fake space: p in 1..4, default p=1, latency falls with p


def fake_latency(w: Workload, p: int) -> float:
    return 100.0 * sum(w.dims.values()) / p


class FakeLowering(Family):
    """A one-parameter space for every op; the capture still finds the real families'
    operators (``real``: the family whose recognisers it keeps)."""

    ops = tuple(FAMILIES)

    def __init__(self, real: Family | None = None) -> None:
        self.real = real
        self.claims_leftovers = bool(real and real.claims_leftovers)

    def recognisers(self):
        return self.real.recognisers() if self.real else ()

    def absorbs(self, g, node, matches):
        return bool(self.real and self.real.absorbs(g, node, matches))

    def finish(self, g, matches):
        return self.real.finish(g, matches) if self.real else matches

    def leftover(self, g, node):
        return self.real.leftover(g, node) if self.real else None

    def space(self, workload, hw):
        return Space(f"fake_{workload.op}", 1, (Param("p", IntRange(1, POINTS)),))

    def default(self, workload, hw):
        return {"p": 1}

    def lower(self, workload, point, hw):
        raise AssertionError("the fake search never lowers")

    def bound(self, workload, hw):
        return fake_latency(workload, POINTS) / 2

    def reference(self, node, ops, tensors, env):
        raise AssertionError("the fake compiler never evaluates")


@dataclass(frozen=True)
class FakeResult:
    workload: Workload
    count: int
    default: Measurement
    best: Measurement
    measurements: int
    history: tuple[float, ...] = ()
    new: int = 0
    predicted_gain_ns: float = math.nan
    search_s: float = 0.0
    measure_s: float = 0.0


def fake_tune_tasks(tasks, ctx, *, interrupt_after=None):
    """Measure p = 1, 2, ... per task in turn, skipping stored points, until ``ctx.trials``."""
    assert isinstance(ctx, SearchContext)
    hw, db, trials, progress = ctx.hardware, ctx.database, ctx.trials, ctx.progress
    low, spent, out = FakeLowering(), 0, []
    per = {}
    for t in tasks:
        w = t.workload
        space = low.space(w, hw)
        ms = []
        for p in range(1, POINTS + 1):
            s = Schedule.of(space, {"p": p})
            m = db.find(w, hw.fingerprint, s, SIM_VERSION)
            if m is None and spent < trials:
                m = Measurement(w, s, hw.fingerprint, hw.name, SIM_VERSION, fake_latency(w, p),
                                1.0, low.bound(w, hw))
                db.commit(m)
                spent += 1
                per[w.key] = per.get(w.key, 0) + 1
                if progress:
                    progress(types.SimpleNamespace(used=spent, budget=trials, workload=w,
                                                   best_ns=m.latency_ns))
                if interrupt_after is not None and spent >= interrupt_after:
                    raise KeyboardInterrupt
            if m is not None:
                ms.append(m)
        best = min(ms, key=lambda m: m.latency_ns) if ms else None
        out.append(FakeResult(w, t.count, ms[0] if ms else None, best, len(ms), (),
                              per.get(w.key, 0)))
    return out


def fake_simulate_step(step, system, *, db=None, fusion=None, baseline=True, graph=None,
                       placement=None, ops=True, partition=None):
    graph = model_graph(step.model, phase=step.phase, batch=step.batch,
                        context=step.context)[1]  # plans ignored
    lat = 0.0
    for n in graph:
        r = lookup(db, n.workload, system.device)
        lat += fake_latency(n.workload, int(r.schedule.point["p"]))
    lat *= 0.5 if fusion and fusion.get("merge_qkv") else 1.0  # the fused plan is faster
    lat *= PLAN_FACTOR.get(placement or "auto", 1.0)
    return types.SimpleNamespace(latency_ns=lat, bound_ns=lat / 4, baseline_ns=lat * 3,
                                 tokens_per_s=step.batch * 1e9 / lat, energy_pj=2.0 * lat,
                                 ops=[], placement=placement or "auto")


PLAN_FACTOR = {"auto": 1.0, "pim": 1.5, "host": 2.0}


def fake_choose_plan(step, system, *, db=None, fusion=None, partition=None):
    return {p: fake_simulate_step(step, system, db=db, fusion=fusion, placement=p)
            for p in PLAN_FACTOR}


def fake_plain_memory_ns(step, system, *, partition=None):
    return 3 * fake_simulate_step(step, system).latency_ns


@pytest.fixture
def fakes(monkeypatch):
    """Install the doubles; returns the fake search module (its tune_tasks can be swapped)."""
    for op, fam in list(registry_mod.FAMILIES.items()):
        monkeypatch.setitem(registry_mod.FAMILIES, op, FakeLowering(fam))
    search = types.ModuleType("autosched.search")
    search.tune_tasks = fake_tune_tasks
    search.SearchContext = SearchContext  # the real context: tune builds it as it would
    compiler = types.ModuleType("autosched.compiler")
    compiler.simulate_step = fake_simulate_step
    compiler.plain_memory_ns = fake_plain_memory_ns
    compiler.choose_placement = fake_choose_plan
    compiler.PLACEMENTS = tuple(PLAN_FACTOR)
    compiler.Partition = real_compiler.Partition
    compiler.choose_partition = lambda step, system: [
        {"partition": real_compiler.Partition.single(step.model.layers), "fits": True,
         "bytes_per_device": 0.0}]
    compiler.unfit_reason = real_compiler.unfit_reason
    compiler.partition_graph = real_compiler.partition_graph
    compiler.pin_graph = real_compiler.pin_graph
    monkeypatch.setitem(sys.modules, "autosched.search", search)
    monkeypatch.setitem(sys.modules, "autosched.search.shared", shared)
    monkeypatch.setitem(sys.modules, "autosched.compiler", compiler)
    return search


def test_report_has_every_field_and_tuned_never_loses(fakes, tmp_path):
    seen = []
    rep = tune(TINY, db=tmp_path / "t.db", trials=1000, workers=1, cost_model="none",
               fusion="none", progress=lambda p: seen.append(p.used))
    d = rep.to_dict()
    for key in ("model", "hardware", "hardware_fingerprint", "phase", "measurements", "wall_s",
                "tasks", "end_to_end"):
        assert key in d
    assert d["model"] == "tiny-test" and d["phase"] == "decode" and d["context"] == 128
    assert d["hardware_fingerprint"] == load_hardware("hbm-pim").fingerprint
    for t in d["tasks"]:
        assert set(t) >= {"workload", "op", "shape", "count", "default_ns", "tuned_ns",
                          "bound_ns", "measurements", "schedule"}
        assert t["tuned_ns"] <= t["default_ns"]
        assert t["schedule"]["params"] == {"p": POINTS}
    e = d["end_to_end"]
    assert set(e) >= {"default_ns", "tuned_ns", "bound_ns", "baseline_ns", "tokens_per_s",
                      "energy_pj"}
    assert e["tuned_ns"] == pytest.approx(e["default_ns"] / POINTS)
    assert rep.measurements == POINTS * len(rep.tasks) == seen[-1]
    assert rep.reused == 0
    assert json.loads(json.dumps(d)) == d


def test_rerun_resumes_and_reuses_everything(fakes, tmp_path):
    db = tmp_path / "t.db"
    first = tune(TINY, db=db, trials=5, workers=1, cost_model="none")
    assert first.measurements == 5
    second = tune(TINY, db=db, trials=1000, workers=1, cost_model="none")
    assert second.reused == 5
    third = tune(TINY, db=db, trials=1000, workers=1, cost_model="none")
    assert third.measurements == 0 and third.reused == first.measurements + second.measurements
    recs = open_database(db).records()
    keys = [(m.workload.key, m.schedule.key) for m in recs]
    assert len(keys) == len(set(keys))


def test_prefill_uses_context_as_prompt_capped_at_max_positions(fakes, tmp_path):
    rep = tune(TINY, phase="prefill", context=1000, db=tmp_path / "t.db", trials=0,
               cost_model="none", fusion="none")
    assert rep.context == TINY.max_positions
    assert rep.end_to_end.tuned_ns == rep.end_to_end.default_ns


def test_plan_with_best_tuned_latency_is_chosen_and_stored(fakes, tmp_path, monkeypatch):
    saved = []
    plans = [None, FULL_FUSION]
    monkeypatch.setattr(tune_mod, "fusion_plans", lambda fusion: plans)
    db = open_database(tmp_path / "t.db")
    monkeypatch.setattr(db, "save_plan", lambda *a: saved.append(a), raising=False)
    rep = tune(TINY, db=db, trials=0, cost_model="none", fusion="auto")
    assert rep.end_to_end.plan == FULL_FUSION
    # the default step is the default (fused) plan's: the unfused one is twice as slow
    assert rep.end_to_end.tuned_ns == pytest.approx(rep.end_to_end.default_ns)
    assert [p for p, *_ in rep.plans] == plans
    assert rep.plans[0][1] == pytest.approx(2 * rep.plans[1][1])
    assert saved and saved[0][0] == "tiny-test:decode:b1" and saved[0][2] == FULL_FUSION


def test_fastest_placement_plan_is_reported(fakes, tmp_path, monkeypatch):
    monkeypatch.setitem(PLAN_FACTOR, "host", 0.25)  # all on the host beats the tuned mix
    monkeypatch.setattr(tune_mod, "fusion_plans", lambda fusion: [None])  # unfused alone
    rep = tune(TINY, db=tmp_path / "t.db", trials=0, cost_model="none", fusion="none")
    assert rep.end_to_end.placement == "host"
    assert rep.end_to_end.tuned_ns == pytest.approx(rep.end_to_end.default_ns / 4)
    assert rep.to_dict()["end_to_end"]["placement"] == "host"


def test_tasks_keep_each_workload_once_with_its_largest_count():
    g = capture(TINY, context=8)
    two = tasks(g, g)
    assert [t.key for t in two] == [t.key for t in tasks(g)]
    assert sum(t.count for t in two) == len(g)


def test_bad_settings_are_rejected_before_any_work(tmp_path, fakes):
    from sim.errors import AutoschedError

    with pytest.raises(AutoschedError, match="sampler"):
        tune(TINY, db=tmp_path / "t.db", sampler="grid")
    with pytest.raises(AutoschedError, match="fusion"):
        fusion_plans("sometimes")
    assert fusion_plans("none") == [None]
    with pytest.raises(AutoschedError, match="trials"):
        tune(TINY, db=tmp_path / "t.db", trials=-1)


def test_speedup_is_nan_for_a_task_that_never_ran():
    from autosched.report import TaskReport

    t = TaskReport(Workload.make("argmax", m=1, n=8), 1, math.inf, math.inf, 1.0, 0, None)
    assert math.isnan(t.speedup) and t.to_dict()["tuned_ns"] is None


def test_finalists_are_the_best_estimates_and_every_close_one() -> None:
    """Three plans at least; more (up to eight) while within 10 % of the best estimate,
    because the estimate ignores the overlap that reorders close plans."""
    est = [40810.0, 40795.0, 40810.0, 42475.0, 44152.0, 50611.0, 53953.0]
    assert tune_mod.finalists(est) == [1, 0, 2, 3, 4]
    assert tune_mod.finalists([1.0, 5.0, 9.0, 2.0]) == [0, 3, 1]
    assert tune_mod.finalists([1.0] * 12) == list(range(8))
    assert tune_mod.finalists([]) == []


def test_a_tuned_step_slower_than_the_default_is_never_stored(fakes, tmp_path, monkeypatch):
    fake_compiler = sys.modules["autosched.compiler"]  # installed by ``fakes``

    def overlapping(step, system, *, db=None, **kw):  # tuned alone, slower together
        fig = fake_simulate_step(step, system, db=db, **kw)
        return types.SimpleNamespace(**{**vars(fig), "latency_ns": fig.latency_ns * (
            1 if db is None else 2 * POINTS)})

    monkeypatch.setattr(fake_compiler, "simulate_step", overlapping)
    monkeypatch.setattr(tune_mod, "fusion_plans", lambda fusion: [None])
    db = open_database(tmp_path / "t.db")
    rep = tune(TINY, db=db, trials=1000, cost_model="none", fusion="none")
    e = rep.end_to_end
    assert e.tuned_ns == e.default_ns and e.schedules == "default"
    from autosched.ir import PlanKey, PlanKind
    from autosched.pipeline import step_of

    step = step_of(TINY, phase="decode", batch=1, context=rep.context)
    stored = db.plan(str(PlanKey.of(PlanKind.PLACEMENT, step)), rep.hardware_fingerprint)
    assert stored == {"placement": "auto", "schedules": "default"}


def test_a_serving_profile_shares_one_budget_and_measures_shared_tasks_once(fakes, tmp_path):
    from autosched.tune_profile import buckets_of, tune_profile

    buckets = buckets_of(["decode"], [1], [16, 32])  # the same workloads except attention
    db = tmp_path / "t.db"
    prof = tune_profile(TINY, buckets, trials=1000, db=db, workers=1, cost_model="none",
                        fusion="none")
    assert [(r.phase, r.context) for r in prof.reports] == [("decode", 16), ("decode", 32)]
    first, second = prof.reports
    assert second.reused > 0  # what the first bucket measured is not measured again
    keys = [(m.workload.key, m.schedule.key) for m in open_database(db).records()]
    assert len(keys) == len(set(keys)) == prof.measurements
    assert all(r.end_to_end.tuned_ns <= r.end_to_end.default_ns for r in prof.reports)
    capped = tune_profile(TINY, buckets, trials=3, db=tmp_path / "u.db", workers=1,
                          cost_model="none", fusion="none")
    assert capped.measurements <= 3
    with pytest.raises(Exception, match="phase"):
        buckets_of(["serve"], [1], [16])


def test_a_step_that_cannot_fit_is_refused_before_anything_is_measured(tmp_path):
    """llama2-7b's weights and KV cache at batch 8, context 1024 exceed one hbm-pim
    device: ``tune`` and a profile holding that bucket say so and measure nothing, not
    even the buckets that would fit."""
    from autosched.tune_profile import buckets_of, tune_profile
    from sim.errors import SimError

    db = tmp_path / "t.db"
    with pytest.raises(SimError, match=r"batch 8 context 1024 does not fit hbm-pim.*nothing was"):
        tune("llama2-7b", batch=8, context=1024, db=db, cost_model="none")
    with pytest.raises(SimError, match=r"1 of 2 buckets cannot run on hbm-pim") as e:
        tune_profile("llama2-7b", buckets_of(["decode"], [1, 8], [1024]), trials=8, db=db,
                     cost_model="none")
    assert "GB per device" in str(e.value) and "batch 1 " not in str(e.value)
    assert not db.exists() or open_database(db).records() == []


def test_carried_plans_join_the_final_comparison_once_each():
    """A plan another bucket won is simulated on the tuned schedules under its own
    placement; a pair the comparison already has is not simulated twice."""
    calls = []

    def sim(step, system, *, db=None, fusion=None, placement="auto", **kw):
        calls.append((tuple(sorted((fusion or {}).items())), placement, db is not None))
        return types.SimpleNamespace(latency_ns=1.0 if placement == "host" else 2.0)

    mine, other = {"merge_qkv": True}, {"merge_gate_up": True}
    default = types.SimpleNamespace(latency_ns=3.0)
    cands = tune_mod._candidates(None, None, object(), mine, None, default, default, sim,
                                 ("auto", "host"), {},
                                 carry=[(other, "host"), (mine, "host"), (other, "host")])
    got = [(c.plan, c.placement, c.schedules) for c in cands]
    assert got == [({}, "auto", "default"), (mine, "auto", "tuned"), (mine, "host", "tuned"),
                   (mine, "auto", "default"), (other, "host", "tuned")]
    assert len(calls) == 3
