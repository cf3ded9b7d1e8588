"""Program format: normalisation, JSON round trip, assembly, and malformed JSON errors."""

from __future__ import annotations

import json

import pytest

from sim.errors import ProgramError
from sim.isa import Act, Affine, BufRef, HostOp, Mac, Pre, RdAcc, Signal, Wait, WrGb, aff
from sim.program import Buffer, Loop, Program, Stream


def sample_program() -> Program:
    body = [
        WrGb(BufRef("x", 0, (128,)), 0),
        Loop("r", 4, [
            Act(0, 2, aff(0, r=1, ch=4)),
            Mac(0, 2, 0, 32, aff(0, r=32), 0, "bcast"),
            Pre(0, 2),
        ]),
        RdAcc(0, 2, 0, 1, BufRef("y", aff(0, ch=128), (128,))),
        Signal("done"),
    ]
    host = [Wait(("done",)), HostOp("scale", (BufRef("z", 0, (8,)),), (BufRef("y", 0, (8,)),),
                                    (("alpha", 0.5),))]
    return Program(
        streams=(Stream("pim", "pim", range(8), body), Stream("host", "host", (), host)),
        buffers=(Buffer("x", "fp16", 128), Buffer("y", "fp32", 1024), Buffer("z", "fp32", 8)),
        name="sample",
    )


def test_ints_become_affine_and_lists_tuples() -> None:
    m = Mac(0, 1, 3, 2, 0, 1)
    assert m.col == Affine(3) and m.reg == Affine(1) and m.lane == Affine(0)
    assert isinstance(Stream("s", "pim", [0, 1], []).channels, tuple)
    assert aff(2, i=0, j=3) == Affine(2, (("j", 3),))
    assert aff(1, ch=2).eval({"ch": 3}) == 7


def test_json_round_trip_and_hash() -> None:
    p = sample_program()
    q = Program.from_json(p.to_json())
    assert q == p and hash(q) == hash(p)
    d = json.loads(p.to_json())
    assert d["streams"][0]["channels"] == {"start": 0, "count": 8}
    assert Program.from_dict(d) == p


def test_assembly_is_readable() -> None:
    asm = sample_program().to_asm()
    assert ".stream pim pim ch0..ch7" in asm
    assert "loop r < 4:" in asm
    assert "mac    b0:2 col=0 ncols=32 gb=32*r reg=0 mode=bcast" in asm
    assert "host   kind=scale" in asm and "{alpha=0.5}" in asm


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "not valid JSON"),
        ('{"buffers": []}', "malformed program JSON: KeyError"),
        ('{"buffers": [], "streams": [{"name": "s", "engine": "pim", "channels": [0],'
         ' "body": [{"op": "jump"}]}]}', "unknown instruction 'jump'"),
    ],
)
def test_malformed_json(text: str, message: str) -> None:
    with pytest.raises(ProgramError, match=message):
        Program.from_json(text)


def test_unknown_buffer() -> None:
    with pytest.raises(ProgramError, match="no buffer 'w'"):
        sample_program().buffer("w")
