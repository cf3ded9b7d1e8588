"""The dispatch construct: the functional simulator follows the value the host wrote,
the timing simulator and the bound the path in ``taken`` (or a recorded one), and the
program round-trips through JSON and assembly."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from sim.bound import bound
from sim.functional import DeviceMemory, execute
from sim.hwio import load_hardware
from sim.isa import Act, BufRef, HostOp, Mac, Pre, Signal, Wait, aff
from sim.program import Buffer, Dispatch, Program, Stream, with_trips
from sim.timing.engine import simulate


def _program(taken: int) -> Program:
    pim = (Wait(("go",)),
           Dispatch("t", 4, (Act(0, 1, aff(0, t=1)),
                             Mac(0, 1, aff(0), 8, aff(0), 0, "dot", 0), Pre(0, 1)),
                    BufRef("n", aff(0), (1,)), taken))
    host = (HostOp("copy", (BufRef("n", aff(0), (1,)),), (BufRef("x", aff(0), (1,)),)),
            Signal("go"),
            Dispatch("u", 4, (HostOp("scale", (BufRef("y", aff(0, u=1), (1,)),),
                                     (BufRef("x", aff(0), (1,)),), (("alpha", 2.0),)),),
                     BufRef("n", aff(0), (1,)), taken))
    return Program((Stream("pim0", "pim", (0,), pim), Stream("host", "host", (), host)),
                   (Buffer("x", "fp32", 1), Buffer("n", "fp32", 1), Buffer("y", "fp32", 4)))


def test_functional_follows_the_data_and_records_the_trips() -> None:
    hw = load_hardware("aim-gddr6")
    prog = _program(taken=1)
    for n in (0, 3):
        trips: dict[str, list[int]] = {}
        out = execute(prog, hw, DeviceMemory(hw), {"x": np.array([n], np.float32)},
                      trips=trips)
        assert trips == {"pim0": [n], "host": [n]}
        assert list(out["y"]) == [2.0 * n] * n + [0.0] * (4 - n)


def test_timing_takes_the_path_and_never_beats_the_bound() -> None:
    hw = load_hardware("aim-gddr6")
    times = []
    for taken in (0, 1, 4):
        prog = _program(taken)
        t = simulate(prog, hw).latency_ns
        assert t >= bound(prog, hw).ns * (1 - 1e-9)
        times.append(t)
    assert times[0] < times[1] < times[2]
    again = with_trips(_program(0), {"pim0": [4], "host": [4]})
    assert simulate(again, hw).latency_ns == times[2]


def test_json_and_assembly_round_trip() -> None:
    prog = _program(2)
    assert Program.from_json(prog.to_json()) == prog
    assert "dispatch t < 4 when n[0; 1] taken=2:" in prog.to_asm()


def test_a_pim_dispatch_may_select_by_device_but_not_by_channel() -> None:
    """``dev`` is fixed within a device, so a PIM stream's selector may use it (each device
    dispatches its own experts); ``ch`` would differ between the stream's channels."""
    from sim.errors import ProgramError
    from sim.validate import validate

    hw = load_hardware("aim-gddr6")

    def with_sel(sel: BufRef) -> Program:
        prog = _program(1)
        pim = prog.streams[0]
        body = (pim.body[0], dataclasses.replace(pim.body[1], sel=sel))
        streams = (dataclasses.replace(pim, channels=(0, 1), body=body), prog.streams[1])
        bufs = tuple(dataclasses.replace(b, size=4) if b.name == "n" else b
                     for b in prog.buffers)
        return dataclasses.replace(prog, streams=streams, buffers=bufs)

    validate(with_sel(BufRef("n", aff(0, dev=1), (1,))), hw)
    with pytest.raises(ProgramError, match="same on every channel"):
        validate(with_sel(BufRef("n", aff(0, ch=1), (1,))), hw)
