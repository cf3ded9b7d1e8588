"""validate(): one broken program per rule, each error naming stream, path and rule."""

from __future__ import annotations

import dataclasses

import pytest

from sim.errors import HardwareError, ProgramError
from sim.hwio import load_hardware
from sim.isa import (
    Act,
    Af,
    BufRef,
    ClrAcc,
    Ew,
    HostOp,
    Mac,
    Pre,
    RdAcc,
    RdBank,
    Signal,
    Wait,
    WrAcc,
    WrBank,
    WrGb,
    aff,
)
from sim.program import Buffer, Loop, Program, Stream
from sim.validate import validate

HBM, AIM = load_hardware("hbm-pim"), load_hardware("aim-gddr6")
BUFS = (Buffer("x", "fp16", 256), Buffer("y", "fp32", 1024))


def pim(*body, channels=(0, 1), name="pim0") -> Program:
    return Program((Stream(name, "pim", channels, body),), BUFS)


def with_pim(**changes):
    """hbm-pim with some PimUnit fields changed."""
    return dataclasses.replace(HBM, pim=dataclasses.replace(HBM.pim, **changes))


def test_valid_program_passes() -> None:
    host = Stream("host", "host", (), (Wait(("t",)), HostOp(
        "reduce_sum", (BufRef("y", 0, (4,)),), (BufRef("y", 4, (4, 16)),))))
    body = (
        WrGb(BufRef("x", aff(0, ch=128), (128,)), 0),
        ClrAcc(0, 2, 0, 8),
        Loop("i", 4, (Act(0, 2, aff(0, i=1)), Mac(0, 2, 0, 8, 0, aff(0, i=2), "lane"),
                      Mac(0, 2, 8, 16, 0, aff(1, i=2), "bcast"), Pre(0, 2))),
        RdAcc(0, 2, 0, 2, BufRef("y", aff(0, ch=256), (256,))),
        Act(1, 0, 3), Ew(1, 0, "add", 31, 7), Af(1, 0, "relu", 7), WrAcc(1, 0, 0, 7),
        RdBank(1, 0, 2, BufRef("y", aff(512, ch=32), (32,))),
        WrBank(1, 2, 2, BufRef("x", 0, (32,))), Pre(1, 0),
        Signal("t"),
    )
    validate(Program((Stream("pim0", "pim", (0, 1), body), host), BUFS), HBM)
    dot = pim(Act(0, 1, 0), Mac(0, 1, 0, 64, 0, 3, "dot", aff(0, ch=15)), channels=(0,))
    validate(dot, load_hardware("aim-gddr6"))
    with pytest.raises(HardwareError, match="takes a Hardware.*load_hardware"):
        validate(dot, "aim-gddr6")  # names are resolved once, by the caller


CASES = [
    # (hardware, program, message regex)
    (HBM, pim(Act(0, 2, 16384)), r"pim0 body\[0\] act: row spans \[16384, 16385\)"),
    (HBM, pim(Act(0, 2, aff(0, i=1))), r"pim0 body\[0\] act: row uses unbound variable 'i'"),
    (HBM, pim(Loop("i", 2, (Pre(0, 0), Act(0, 0, aff(0, j=1))))),
     r"pim0 body\[0\]\.loop\[i\]\[1\] act: row uses unbound variable 'j' \(in scope: ch, i\)"),
    (HBM, pim(Loop("i", 2, (Loop("i", 2, ()),))),
     r"body\[0\]\.loop\[i\]\[0\] loop\[i\]: loop variable 'i' shadows"),
    (HBM, pim(Loop("ch", 2, ())), r"loop variable 'ch' shadows"),
    (HBM, pim(Loop("i", -1, ())), r"loop count -1 must be >= 0"),
    (HBM, pim(Act(16, 0, 0)), r"act: bank 16 outside \[0, 16\)"),
    (HBM, pim(Pre(0, 16)), r"pre: step 16 outside"),
    (HBM, pim(Mac(0, 1, 0, 1, 0, 0)), r"mac: step 1 makes banks share a unit.*banks_per_unit"),
    (HBM, pim(ClrAcc(1, 3, 0, 1)), r"clr: step 3 makes banks share a unit"),
    (HBM, pim(Mac(0, 2, 30, 3, 0, 0)), r"mac: columns spans \[30, 33\) outside \[0, 32\)"),
    (HBM, pim(Mac(0, 2, aff(0, ch=31), 2, 0, 0)), r"columns spans \[0, 33\)"),
    (HBM, pim(Mac(0, 2, 0, 0, 0, 0)), r"ncols 0 must be >= 1"),
    (HBM, pim(Mac(0, 2, 0, 9, 0, 0)), r"mac: global buffer spans \[0, 144\) outside \[0, 128\)"),
    (HBM, pim(Mac(0, 2, 0, 9, 120, 0, "bcast")), r"global buffer spans \[120, 129\)"),
    (HBM, pim(Mac(0, 2, 0, 1, 0, 8)), r"mac: registers spans \[8, 9\) outside \[0, 8\)"),
    (HBM, pim(ClrAcc(0, 2, 4, 5)), r"clr: registers spans \[4, 9\)"),
    (HBM, pim(ClrAcc(0, 2, 0, 0)), r"nregs 0 must be >= 1"),
    (HBM, pim(Mac(0, 2, 0, 1, 0, 0, "dot")), r"dot mode needs an adder tree.*use lane"),
    (HBM, pim(Mac(0, 2, 0, 1, 0, 0, "outer")), r"mac mode 'outer' unknown"),
    (AIM, pim(Mac(0, 1, 0, 1, 0, 0, "dot", 16)), r"mac: lane spans \[16, 17\) outside \[0, 16\)"),
    (with_pim(register_lanes=8), pim(Mac(0, 2, 0, 1, 0, 0, "bcast")),
     r"bcast mode needs register_lanes \(8\) == lanes \(16\)"),
    (with_pim(register_lanes=32), pim(WrAcc(0, 2, 0, 0)), r"wracc needs register_lanes"),
    (HBM, pim(Ew(0, 2, "sub", 0, 0)), r"ew: element-wise fn 'sub' unknown"),
    (with_pim(elementwise=False), pim(Ew(0, 2, "add", 0, 0)), r"no in-bank element-wise unit"),
    (HBM, pim(Af(0, 2, "gelu", 0)), r"af: activation 'gelu' not on hbm-pim \(available: relu\)"),
    (HBM, pim(WrGb(BufRef("x", 0, (129,)), 0)), r"wrgb: global buffer spans \[0, 129\)"),
    (HBM, pim(WrGb(BufRef("z", 0, (16,)), 0)), r"wrgb: src names unknown buffer 'z'"),
    (HBM, pim(WrGb(BufRef("x", aff(0, ch=250), (16,)), 0)),
     r"src window of 'x' spans \[0, 266\) outside \[0, 256\)"),
    (HBM, pim(WrGb(BufRef("x", -1, (16,)), 0)), r"src window of 'x' spans \[-1, 15\)"),
    (HBM, pim(WrGb(BufRef("x", 0, (0,)), 0)), r"src shape \(0,\) must have positive"),
    (HBM, pim(RdAcc(0, 2, 0, 2, BufRef("y", aff(0, ch=256), (128,)))),
     r"rdacc: dst has 128 elements, the instruction moves 256"),
    (HBM, pim(RdAcc(0, 0, 0, 1, BufRef("y", 0, (16,)))),
     r"rdacc: dst windows of different channels overlap.*ch stride of at least 16"),
    (HBM, pim(RdBank(0, 0, 2, BufRef("y", aff(0, ch=16), (32,)))), r"rd: dst windows .*overlap"),
    (HBM, pim(RdBank(0, 0, 2, BufRef("y", 0, (16,)), ), channels=(0,)),
     r"rd: dst has 16 elements, the instruction moves 32"),
    (HBM, pim(WrBank(0, 31, 2, BufRef("x", 0, (32,)))), r"wr: columns spans \[31, 33\)"),
    (HBM, pim(HostOp("copy", (BufRef("y", 0, (4,)),), (BufRef("y", 4, (4,)),))),
     r"pim0 body\[0\] host: host ops belong in the host stream"),
    (HBM, Program((Stream("h", "host", (), (Pre(0, 0),)),), BUFS),
     r"h body\[0\] pre: the host stream runs only host ops"),
    (HBM, Program((Stream("h", "host", (), (HostOp("conv", (), ()),)),), BUFS),
     r"h body\[0\] host: unknown host op 'conv'"),
    (HBM, Program((Stream("h", "host", (), (HostOp("add", (BufRef("y", 0, (4,)),),
                                                    (BufRef("y", 4, (4,)),)),)),), BUFS),
     r"host op 'add' takes 2 inputs and 1 output, got 1 and 1"),
    (HBM, Program((Stream("h", "host", (), (HostOp("copy", (BufRef("y", aff(0, ch=4), (4,)),),
                                                    (BufRef("y", 4, (4,)),)),)),), BUFS),
     r"outs\[0\] window of 'y' uses unbound variable 'ch' \(in scope: dev\)"),
    (HBM, pim(Pre(0, 0), channels=(63, 64)), r"pim0: channel 64 outside \[0, 64\)"),
    (HBM, pim(Pre(0, 0), channels=()), r"pim0: a PIM stream needs at least one channel"),
    (HBM, Program((Stream("a", "pim", (0, 1), ()), Stream("b", "pim", (1, 2), ())), BUFS),
     r"b: channel 1 is already used by stream 'a'"),
    (HBM, Program((Stream("a", "pim", (0,), ()), Stream("a", "pim", (1,), ())), BUFS),
     r"stream name 'a' is used twice"),
    (HBM, Program((Stream("a", "gpu", (0,), ()),), BUFS), r"engine 'gpu' must be"),
    (HBM, Program((), (Buffer("x", "fp16", 4), Buffer("x", "fp32", 4))),
     r"buffer 'x' is declared twice"),
    (HBM, Program((), (Buffer("x", "int8", 4),)), r"buffer 'x': dtype must be one of"),
    (HBM, Program((), (Buffer("x", "fp16", 0),)), r"and size > 0"),
    (HBM, Program((Stream("a", "pim", (0,), (Signal("t"),)),
                   Stream("b", "pim", (1,), (Loop("i", 2, (Signal("t"),)),))), BUFS),
     r"token 't' is signalled by streams \['a', 'b'\]"),
    (HBM, Program((Stream("a", "pim", (0,), (Loop("i", 2, (Wait(("t", "u")),)),)),
                   Stream("b", "pim", (1,), (Signal("t"),))), BUFS),
     r"a: wait on token 'u' that no stream signals"),
]


@pytest.mark.parametrize("hw,program,message", CASES, ids=[c[2][:40] for c in CASES])
def test_rule(hw, program: Program, message: str) -> None:
    with pytest.raises(ProgramError, match=message):
        validate(program, hw)


def test_bounds_follow_loop_ranges_and_signs() -> None:
    """A negative stride reaches its minimum at the last iteration."""
    ok = pim(Loop("i", 4, (Act(0, 2, aff(3, i=-1)), Pre(0, 2))))
    validate(ok, HBM)
    bad = pim(Loop("i", 5, (Act(0, 2, aff(3, i=-1)), Pre(0, 2))))
    with pytest.raises(ProgramError, match=r"row spans \[-1, 4\)"):
        validate(bad, HBM)


def test_error_names_the_node_by_its_path() -> None:
    """The path and the instruction are formatted only when a rule breaks: the message
    still names the stream, every index and loop on the way, and the mnemonic."""
    bad = pim(Pre(0, 2), Loop("i", 5, (Pre(0, 2), Act(0, 2, aff(3, i=-1)))))
    with pytest.raises(ProgramError) as e:
        validate(bad, HBM)
    assert str(e.value).startswith("pim0 body[1].loop[i][1] act: row spans [-1, 4)")
    loop = pim(Pre(0, 2), Loop("i", -1, (Pre(0, 2),)))
    with pytest.raises(ProgramError, match=r"^pim0 body\[1\] loop\[i\]: loop count -1"):
        validate(loop, HBM)
