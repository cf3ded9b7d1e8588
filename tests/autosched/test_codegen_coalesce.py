"""Stream coalescing: per-channel copies of one body become one SPMD stream, and the
program computes and times exactly as before; a run ends where its bases stop stepping
by one amount."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from autosched.codegen.coalesce import coalesce, coalesce_kernel
from autosched.families.registry import build, family_of
from search_spaces import Workload
from sim.functional import DeviceMemory
from sim.hwio import load_hardware
from sim.kernels import Kernel
from sim.timing import simulate
from sim.validate import validate

CAP = 128


def attention(nq: int, ctx: int) -> Workload:
    """One kv head of 16 lanes, 4 query heads: split over the channels by sequence."""
    return Workload.make("attention", attrs={"capacity": CAP}, b=1, q=nq, h=4, kvh=1, d=16,
                         l=ctx)


def decode(hw, kern: Kernel, seed: int = 0) -> np.ndarray:
    """``kern`` (a decode step at position 96) run after a 96-token prefill, both with the
    same seeded tensors."""
    rng = np.random.default_rng(seed)
    mem = DeviceMemory(hw)
    fill = attention(96, 96)
    prefill = build(fill, family_of(fill).default(fill, hw), hw)
    prefill.run(hw, {n: rng.standard_normal((96, 64 if n == "q" else 16)).astype(np.float32)
                     for n in ("q", "k", "v")}, mem=mem)
    new = {n: rng.standard_normal((1, 64 if n == "q" else 16)).astype(np.float32)
           for n in ("q", "k", "v")}
    return kern.run(hw, new, mem=mem)


@pytest.mark.parametrize("hw_name", ["hbm-pim", "aim-gddr6"])
def test_sequence_split_becomes_one_stream_with_equal_results_and_timing(hw_name: str) -> None:
    hw = load_hardware(hw_name)
    w = attention(1, 97)
    kern = build(w, family_of(w).default(w, hw), hw)
    merged = coalesce_kernel(kern, hw)
    pim = [s for s in kern.program.streams if s.engine == "pim"]
    after = [s for s in merged.program.streams if s.engine == "pim"]
    assert len(after) < len(pim)  # the per-channel copies merged
    assert sorted(c for s in after for c in s.channels) == \
        sorted(c for s in pim for c in s.channels)  # every channel still runs
    validate(merged.program, hw)
    np.testing.assert_array_equal(decode(hw, merged), decode(hw, kern))
    assert simulate(merged.program, hw).latency_ns == simulate(kern.program, hw).latency_ns


def test_a_run_ends_where_the_addresses_stop_stepping_linearly() -> None:
    hw = load_hardware("hbm-pim")
    w = attention(1, 97)
    kern = build(w, family_of(w).default(w, hw), hw)
    by_ch = sorted((s for s in kern.program.streams if s.engine == "pim"),
                   key=lambda s: s.channels[0])
    a, b = by_ch[1], by_ch[2]  # swap two bodies: the bases step 0, 2D, D, 3D, 4D, ...
    swapped = {a.name: dataclasses.replace(a, body=b.body),
               b.name: dataclasses.replace(b, body=a.body)}
    prog = dataclasses.replace(kern.program, streams=tuple(
        swapped.get(s.name, s) for s in kern.program.streams))
    out = coalesce(prog, hw)
    names = {s.name for s in out.streams}
    # 0, 2D is a run of step 2D; D starts the next (0, 2D, 4D would have continued it)
    assert a.name not in names and b.name in names
    assert {by_ch[0].name, b.name} <= names
    first = next(s for s in out.streams if s.name == by_ch[0].name)
    assert first.channels == by_ch[0].channels + a.channels
    got, want = (dataclasses.replace(kern, program=p) for p in (out, prog))
    np.testing.assert_array_equal(decode(hw, got), decode(hw, want))
    assert simulate(out, hw).latency_ns == simulate(prog, hw).latency_ns


def test_a_program_with_nothing_to_merge_is_returned_as_is() -> None:
    hw = load_hardware("hbm-pim")
    w = Workload.make("attention", attrs={"capacity": 16}, b=2, q=1, h=4, kvh=4, d=32, l=7)
    kern = build(w, family_of(w).default(w, hw), hw)
    assert coalesce_kernel(kern, hw) is kern
