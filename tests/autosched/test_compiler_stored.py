"""Plans stored per bucket, and the nearest bucket's for a step that has none
(``compiler.stored``)."""

from __future__ import annotations

import pytest

from autosched.api import compile_model
from autosched.compiler.stored import StoredPlans, stored_plans
from autosched.database import open_database
from autosched.ir import PlanKey, PlanKind, Step
from autosched.pipeline import step_of
from sim.hwio import load_hardware


@pytest.mark.parametrize("key", [
    PlanKey(PlanKind.FUSION, "llama-tiny", "decode", 8),
    PlanKey(PlanKind.PLACEMENT, "llama-tiny", "prefill", 1, 512),
    PlanKey(PlanKind.PLACEMENT, "/models/a:b", "decode", 32, 4096),
    PlanKey(PlanKind.FUSION, "c:\\m:odel", "prefill", 2),
])
def test_a_plan_key_reads_back_what_it_wrote(key: PlanKey) -> None:
    assert PlanKey.parse(str(key)) == key


@pytest.mark.parametrize("text", ["", "llama", "m:decode:8", "m:sideways:b1",
                                  "placement:m:decode:b1", "placement:m:decode:b1:x9",
                                  "m:decode:b", "m:decode:b-1"])
def test_text_no_key_writes_parses_to_none(text: str) -> None:
    assert PlanKey.parse(text) is None


def _bucket(db, hw, model: str, phase: str, batch: int, context: int, side: str) -> None:
    step = Step(_cfg(model), phase, batch, context)
    db.save_plan(str(PlanKey.of(PlanKind.PLACEMENT, step)), hw.fingerprint,
                 {"placement": side, "schedules": "tuned"}, 1.0)
    db.save_plan(str(PlanKey.of(PlanKind.FUSION, step)), hw.fingerprint,
                 {"side": side}, 1.0)


def _cfg(model: str):
    return step_of(model).model


def test_the_nearest_bucket_by_log_batch_and_context(tmp_path) -> None:
    hw = load_hardware("hbm-pim")
    db = open_database(tmp_path / "plans.db")
    for b, c, side in [(1, 1024, "a"), (8, 1024, "b"), (8, 4096, "c"), (32, 4096, "d")]:
        _bucket(db, hw, "llama-tiny", "decode", b, c, side)
    _bucket(db, hw, "llama-tiny", "prefill", 1, 128, "p")
    _bucket(db, hw, "llama2-7b", "decode", 6, 3000, "other model")
    assert sorted(db.plan_keys(hw.fingerprint))[0] == "llama-tiny:decode:b1"
    assert "placement:llama2-7b:decode:b6:c3000" in db.plan_keys(hw.fingerprint)
    assert db.plan_keys("another device") == []

    def near(batch: int, context: int, phase: str = "decode", device=hw):
        return stored_plans(db, Step(_cfg("llama-tiny"), phase, batch, context), device)

    own = near(8, 1024)
    # a fusion plan holds for every context of its batch: the one stored last (c4096's)
    assert own.bucket is None and own.placement["placement"] == "b" and \
        own.fusion == {"side": "c"}
    p = near(6, 3000)  # log distance 0.60 to b8 c4096, 1.36 to b8 c1024
    assert (p.bucket.batch, p.bucket.context, p.fusion, p.placement["placement"]) == \
        (8, 4096, {"side": "c"}, "c")
    assert "decode batch 8 context 4096" in p.note and "batch 6 context 3000" in p.note
    assert near(2, 2048).bucket.batch == 1  # 1.39 from b1 c1024, 2.08 from b8 c1024
    assert near(8, 2048).bucket.context == 1024  # as far from c1024 as c4096: the smaller
    assert near(1, 100, "prefill").placement["placement"] == "p"
    assert near(1, 1024, device=load_hardware("aim-gddr6")) == \
        StoredPlans(asked="decode batch 1 context 1024")


def test_compile_takes_the_nearest_bucket_s_placement(tmp_path) -> None:
    """A bucket tuned to run on the host: a step near it runs on the host too."""
    hw = load_hardware("hbm-pim")
    db = open_database(tmp_path / "plans.db")
    step = Step(_cfg("llama-tiny"), "decode", 4, 64)
    db.save_plan(str(PlanKey.of(PlanKind.PLACEMENT, step)), hw.fingerprint,
                 {"placement": "host"}, 1.0)
    cm = compile_model("llama-tiny", hw, batch=3, context=48, db=db)
    assert cm.placement == "host"
    assert cm.plans_from.startswith("plans of the nearest tuned bucket, decode batch 4 "
                                    "context 64")
    assert compile_model("llama-tiny", hw, batch=3, context=48).plans_from == ""
