"""Streams meeting through Signal/Wait, and bank contents persisting across executions."""

from __future__ import annotations

import numpy as np
import pytest

from sim.errors import SimError
from sim.functional import DeviceMemory, execute
from sim.hwio import load_hardware
from sim.isa import (
    Act,
    BufRef,
    ClrAcc,
    HostOp,
    Mac,
    Pre,
    RdAcc,
    RdBank,
    Signal,
    Wait,
    WrBank,
    WrGb,
    aff,
)
from sim.program import Buffer, Loop, Program, Stream

HW = load_hardware("hbm-pim")


def test_host_result_reaches_pim_and_back() -> None:
    """host: x2 = 2*x, signal; pim: wait, mac x2 against ones, signal; host: wait, sum."""
    mem = DeviceMemory(HW)
    mem.write(0, 0, 0, 0, np.ones(16, np.float32))
    host = Stream("host", "host", (), (
        HostOp("scale", (BufRef("x2", 0, (16,)),), (BufRef("x", 0, (16,)),), (("alpha", 2.0),)),
        Signal("x_ready"),
        Wait(("acc_ready",)),
        HostOp("reduce_sum", (BufRef("y", 0, (1,)),), (BufRef("acc", 0, (1, 16)),)),
    ))
    pim = Stream("pim", "pim", (0,), (
        Act(0, 0, 0),
        Wait(("x_ready",)),
        WrGb(BufRef("x2", 0, (16,)), 0),
        Mac(0, 0, 0, 1, 0, 0, "lane"),
        Pre(0, 0),
        RdAcc(0, 0, 0, 1, BufRef("acc", 0, (16,))),
        Signal("acc_ready"),
    ))
    bufs = (Buffer("x", "fp32", 16), Buffer("x2", "fp16", 16), Buffer("acc", "fp32", 16),
            Buffer("y", "fp32", 1))
    x = np.arange(16, dtype=np.float32)
    for streams in ((host, pim), (pim, host)):  # the order of streams must not matter
        out = execute(Program(streams, bufs), HW, mem, {"x": x})
        assert out["y"][0] == 2 * x.sum()


def test_each_waiter_consumes_every_signal_in_order() -> None:
    """Host produces three vectors in a loop; two PIM streams each consume all three."""
    host = Stream("host", "host", (), (Loop("i", 3, (
        HostOp("scale", (BufRef("x", 0, (16,)),), (BufRef("seed", aff(0, i=16), (16,)),)),
        Signal("x"),
        Wait(("taken0", "taken1")),
    )),))

    def pim(k: int, ch: int) -> Stream:
        return Stream(f"pim{k}", "pim", (ch,), (
            Loop("i", 3, (Wait(("x",)), WrGb(BufRef("x", 0, (16,)), 0),
                          WrBank(0, aff(0, i=1), 1, BufRef("x", 0, (16,))), Signal(f"taken{k}"))),
        ))

    # a bank row must be open for WrBank: open it before the loop in each stream
    streams = [host]
    for k, ch in ((0, 3), (1, 4)):
        s = pim(k, ch)
        streams.append(Stream(s.name, "pim", s.channels, (Act(0, 0, 1), *s.body, Pre(0, 0))))
    seed = np.arange(48, dtype=np.float32)
    mem = DeviceMemory(HW)
    execute(Program(tuple(streams), (Buffer("seed", "fp32", 48), Buffer("x", "fp16", 16))),
            HW, mem, {"seed": seed})
    for ch in (3, 4):
        np.testing.assert_array_equal(mem.read(ch, 0, 1, 0, 48), seed)


def test_deadlock_is_reported() -> None:
    a = Stream("a", "pim", (0,), (Wait(("tb",)), Signal("ta")))
    b = Stream("b", "pim", (1,), (Wait(("ta",)), Signal("tb")))
    with pytest.raises(SimError, match="deadlock.*a waits for tb; b waits for ta"):
        execute(Program((a, b), ()), HW, DeviceMemory(HW), {})


def test_wait_for_more_signals_than_sent_deadlocks() -> None:
    a = Stream("a", "pim", (0,), (Signal("t"),))
    b = Stream("b", "pim", (1,), (Wait(("t",)), Wait(("t",))))
    with pytest.raises(SimError, match="deadlock"):
        execute(Program((a, b), ()), HW, DeviceMemory(HW), {})


CHANS = tuple(range(8))


def kv_append(t: int) -> Program:
    """Decode step t: write k_t (16 elements per channel) into column t of row 5, bank 2."""
    return Program((Stream("pim", "pim", CHANS, (
        Act(2, 0, 5),
        WrBank(2, t, 1, BufRef("k", aff(0, ch=16), (16,))),
        Pre(2, 0),
    )),), (Buffer("k", "fp16", 128),))


def kv_score(steps: int) -> Program:
    """Lane-wise q * k_j for every cached position j (register j), plus the raw cache."""
    return Program((Stream("pim", "pim", CHANS, (
        WrGb(BufRef("q", aff(0, ch=16), (16,)), 0),
        Act(2, 0, 5),
        ClrAcc(2, 0, 0, steps),
        Loop("j", steps, (Mac(2, 0, aff(0, j=1), 1, 0, aff(0, j=1), "lane"),)),
        RdBank(2, 0, steps, BufRef("raw", aff(0, ch=16 * steps), (16 * steps,))),
        Pre(2, 0),
        RdAcc(2, 0, 0, steps, BufRef("s", aff(0, ch=16 * steps), (16 * steps,))),
    )),), (Buffer("q", "fp16", 128), Buffer("s", "fp32", 128 * steps),
           Buffer("raw", "fp16", 128 * steps)))


def test_kv_cache_persists_across_executions() -> None:
    mem = DeviceMemory(HW)
    rng = np.random.default_rng(4)
    ks = rng.integers(-4, 5, (4, 128)).astype(np.float32)  # [position, channel*16]
    for t in range(4):
        execute(kv_append(t), HW, mem, {"k": ks[t]})
    q = rng.integers(-4, 5, 128).astype(np.float32)
    out = execute(kv_score(4), HW, mem, {"q": q})
    per_ch = ks.reshape(4, 8, 16).transpose(1, 0, 2)  # [channel, position, lane]
    np.testing.assert_array_equal(out["raw"].reshape(8, 4, 16), per_ch)
    s = out["s"].reshape(8, 4, 16).sum(-1)
    np.testing.assert_array_equal(s, (per_ch * q.reshape(8, 1, 16)).sum(-1))
    fresh = execute(kv_score(4), HW, DeviceMemory(HW), {"q": q})
    np.testing.assert_array_equal(fresh["s"], 0)
