"""Random single-instruction programs: whatever validate() accepts, execute() runs.

Operands mix constants, ``ch`` and a loop variable with random strides, so the Affine
bounds of validate must cover every index execute computes: any exception other than a
ProgramError (from validate) is a hole in the checks or a crash in the executor.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.errors import ProgramError
from sim.functional import DeviceMemory, execute
from sim.hwio import load_hardware
from sim.isa import (
    Act,
    Af,
    BufRef,
    ClrAcc,
    Ew,
    Mac,
    Pre,
    RdAcc,
    RdBank,
    WrAcc,
    WrBank,
    WrGb,
    aff,
)
from sim.program import Buffer, Loop, Program, Stream

HWS = [load_hardware("hbm-pim"), load_hardware("aim-gddr6")]
SIZE = 4096


@st.composite
def operand(draw, scale: int):
    """Mostly in range: strides are zero half the time and small otherwise."""
    stride = st.one_of(st.just(0), st.integers(-scale // 4 - 1, scale // 4 + 1))
    return aff(draw(st.integers(-1, scale // 2)), ch=draw(stride), i=draw(stride))


@st.composite
def instruction(draw):
    bank, step = draw(st.integers(0, 16)), draw(st.sampled_from([0, 2, 4, 8, 1]))
    col, reg, gb = draw(operand(32)), draw(operand(8)), draw(operand(128))
    n = draw(st.integers(0, 9))  # 0 is invalid on purpose
    ref = BufRef("b", draw(operand(SIZE // 2)), (draw(st.sampled_from([16, 32, 128, 300])),))
    units = 16 // max(step, 1) if step else 1  # right for 1 bank per unit, else rejected

    def sized(k: int) -> BufRef:  # a window of the size the instruction moves
        return BufRef("b", aff(draw(st.integers(0, 64)), ch=k * draw(st.sampled_from([1, 2])),
                               i=draw(st.sampled_from([0, 16]))), (max(k, 1),))
    return draw(st.sampled_from([
        Mac(bank, step, col, n, gb, reg, draw(st.sampled_from(["lane", "bcast", "dot"])),
            draw(operand(16))),
        Ew(bank, step, draw(st.sampled_from(["mov", "add", "mul"])), col, reg),
        Af(bank, step, "relu", reg),
        ClrAcc(bank, step, reg, n),
        WrAcc(bank, step, col, reg),
        RdAcc(bank, step, reg, n, draw(st.sampled_from([ref, sized(units * n * 16)]))),
        RdBank(bank, col, n, draw(st.sampled_from([ref, sized(n * 16)]))),
        WrBank(bank, col, n, draw(st.sampled_from([ref, sized(n * 16)]))),
        WrGb(ref, gb),
    ]))


@settings(max_examples=300, deadline=None)
@given(hw=st.sampled_from(HWS), ins=instruction(), count=st.integers(1, 3),
       channels=st.sampled_from([(0,), (3, 1), (4, 5, 6)]), row=operand(20000))
def test_validated_programs_execute(hw, ins, count, channels, row) -> None:
    body = (Loop("i", count, (Act(0, 1, row), ins, Pre(0, 1))),)
    prog = Program((Stream("pim0", "pim", channels, body),), (Buffer("b", "fp16", SIZE),))
    data = np.arange(SIZE, dtype=np.float32) % 7
    try:
        out = execute(prog, hw, DeviceMemory(hw), {"b": data})
    except ProgramError:
        return
    assert np.isfinite(out["b"]).all()
