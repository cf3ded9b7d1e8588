"""Denser GEMV layouts when a step's weights overflow the device (``compiler.weightfit``)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import StaticCache

from autosched.api import compile_model, run_check
from autosched.families.gemv.fit import layout_options
from autosched.frontend import ModelConfig
from autosched.frontend.source import load_source
from search_spaces.gemv import point_opts
from sim.errors import CapacityError
from sim.hwio import load_hardware
from sim.kernels.gemv_layout import layout_key

# the gate and up GEMVs (3584 x 1024) take denser layouts than their defaults on aim-gddr6
# once the step (36 rows per bank with the defaults) is given 35 rows or 34; 33 rows hold
# no layout of the step (the unfused step's rows; the KV cache keeps its default layout,
# whose register sets a 16-slot cache fills partly)
NONE: dict = {}
WIDE = ModelConfig("llama", hidden=1024, intermediate=3584, layers=1, heads=8, kv_heads=2,
                   head_dim=128, vocab=997, max_positions=64, name="wide")


def _rows(n: int):
    d = load_hardware("aim-gddr6").to_dict()
    return load_hardware({**d, "name": f"aim-{n}rows", "org": {**d["org"], "rows_per_bank": n}})


def test_options_start_at_the_chosen_layout_and_trade_rows_for_latency() -> None:
    cm = compile_model(WIDE, "aim-gddr6", context=16)
    hw = load_hardware("aim-gddr6")
    for n in cm.graph:
        c = cm.choices[n.name]
        if c.workload.op != "gemv":
            continue
        opts = layout_options(c.workload, hw, c.schedule)
        assert opts[0][2] == c.schedule
        rows = [o[0] for o in opts]
        assert rows == sorted(rows, reverse=True) and len(set(rows)) == len(rows)
        assert [o[1] for o in opts[1:]] == sorted(o[1] for o in opts[1:])


def test_a_step_that_overflows_takes_denser_layouts_and_still_computes_right() -> None:
    with pytest.raises(CapacityError):  # not even the densest layouts fit 33 rows
        compile_model(WIDE, _rows(33), context=16, fusion=NONE)
    hw = _rows(34)
    cm = compile_model(WIDE, hw, context=16, fusion=NONE)
    assert cm.budget.fits
    fitted = {n.role for n in cm.graph if cm.choices[n.name].kind == "fitted"}
    assert fitted == {"ffn_gate", "ffn_up"}
    rep = run_check(WIDE, hw, steps=2, db=None, fusion=NONE)
    assert rep.passed, rep.max_rel_err


def test_prefill_reads_the_weights_where_the_fitted_decode_step_keeps_them() -> None:
    """Steps of several rows pin their weights to batch-1 decode's layouts: when those are
    fitted, the prefill step pins the fitted ones, fits, and computes what torch does."""
    hw = _rows(34)
    decode = compile_model(WIDE, hw, context=4, fusion=NONE)
    down = next(n for n in decode.graph if n.role == "ffn_gate")
    assert decode.choices[down.name].kind == "fitted"
    cm = compile_model(WIDE, hw, phase="prefill", context=4, fusion=NONE)
    assert cm.budget.fits
    pinned = {n.workload.attr("layout") for n in cm.graph if n.role == "ffn_gate"}
    d = down.workload.dims
    want = layout_key(point_opts(decode.choices[down.name].schedule.point)
                      .resolve(hw, d["n"], d["k"], 1))
    assert pinned == {want}
    src = load_source(cm.cfg, dtype="bf16")
    mems = cm.memories()
    cm.place(mems, src.weights)
    ids = np.array([[5, 17, 3, 9]])
    out = cm.outputs(cm.execute(mems, src.weights, ids, np.arange(4)))
    cache = StaticCache(config=src.reference.config, max_cache_len=4)
    with torch.no_grad():
        ref = src.reference(input_ids=torch.from_numpy(ids), cache=cache, use_cache=True,
                            logits_to_keep=1).logits.reshape(-1).numpy()
    got = out[cm.logits][: cm.cfg.vocab]
    assert np.max(np.abs(got - ref)) <= 0.02 * np.max(np.abs(ref))
