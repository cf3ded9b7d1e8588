"""Systems of several devices: files, links, system programs, their timing and execution."""

from __future__ import annotations

import numpy as np
import pytest
import yaml

from sim.errors import HardwareError, ProgramError
from sim.functional import DeviceMemory, execute_system
from sim.hardware import Link
from sim.hwio import load_hardware
from sim.isa import BufRef, HostOp, Send, Signal, Wait, aff
from sim.kernels.collective import all_gather, all_reduce, collective_ns
from sim.program import Buffer, Program, Stream
from sim.sysprog import Group, SystemProgram, validate_system
from sim.system import load_system
from sim.timing import simulate, simulate_system


def system(n: int = 4, topology: str = "switch", bw: float = 100.0, lat: float = 1000.0):
    return load_system({"name": f"t{n}", "device": "hbm-pim", "devices": n,
                        "link": {"bandwidth_gbps": bw, "latency_ns": lat,
                                 "topology": topology}})


def test_presets_are_systems_of_the_device_presets() -> None:
    for name, dev in (("hbm-pim-x16", "hbm-pim"), ("aim-gddr6-x16", "aim-gddr6")):
        s = load_system(name)
        assert s.devices == 16 and s.link.topology == "switch"
        assert s.link.bandwidth_gbps == pytest.approx(121.0)  # CXL 3 x16, per direction
        assert s.device.fingerprint == load_hardware(dev).fingerprint
        assert load_hardware(name).fingerprint == load_hardware(dev).fingerprint
        assert s.fingerprint != s.device.fingerprint
        assert s.capacity_bytes == 16 * load_hardware(dev).capacity_bytes
    one = load_system("hbm-pim")
    assert one.devices == 1 and one.link is None
    assert one.fingerprint == load_hardware("hbm-pim").fingerprint


def test_system_file_relative_device(tmp_path) -> None:
    (tmp_path / "dev.yaml").write_text(yaml.safe_dump(load_hardware("aim-gddr6").to_dict()))
    p = tmp_path / "sys.yaml"
    p.write_text(yaml.safe_dump({"name": "two", "device": "dev.yaml", "devices": 2,
                                 "link": {"bandwidth_gbps": 32, "latency_ns": 0,
                                          "topology": "ring"}}))
    s = load_system(p)
    assert s.devices == 2 and s.device.fingerprint == load_hardware("aim-gddr6").fingerprint
    assert load_hardware(p).name == "two"


@pytest.mark.parametrize("patch, match", [
    ({"devices": 0}, "'devices' must be a positive integer"),
    ({"devices": 2, "link": None}, "'link' is missing"),
    ({"link": {"bandwidth_gbps": 1, "latency_ns": 0, "topology": "mesh"}}, "link.topology"),
    ({"link": {"bandwidth_gbps": 0, "latency_ns": 0, "topology": "ring"}}, "bandwidth_gbps"),
    ({"link": {"bandwidth_gbps": 1, "topology": "ring"}}, "link.latency_ns' is missing"),
    ({"links": 3}, "'links' is unknown"),
    ({"device": "nope"}, "field 'device'.*unknown hardware 'nope'"),
    ({"devices": 10**9}, "'devices' must be at most 4096"),
    ({"link": {"bandwidth_gbps": float("nan"), "latency_ns": 0, "topology": "ring"}},
     "bandwidth_gbps' must be a finite number"),
    ({"link": {"bandwidth_gbps": 1e12, "latency_ns": 0, "topology": "ring"}},
     "bandwidth_gbps' must be at most"),
    ({"link": {"bandwidth_gbps": 1, "latency_ns": float("inf"), "topology": "ring"}},
     "latency_ns' must be a finite number"),
])
def test_system_validation(patch: dict, match: str) -> None:
    d = {"name": "s", "device": "hbm-pim", "devices": 2,
         "link": {"bandwidth_gbps": 10, "latency_ns": 5, "topology": "switch"}}
    d.update(patch)
    if d.get("link") is None:
        d.pop("link")
    with pytest.raises(HardwareError, match=match):
        load_system(d)


def test_system_file_limits_as_device_files(tmp_path) -> None:
    """A system file is read under the device files' limits: size, encoding, YAML."""
    from sim.hwio import MAX_FILE_BYTES

    big = tmp_path / "big.yaml"
    big.write_text("devices: 2\n" + "#" * MAX_FILE_BYTES)
    with pytest.raises(HardwareError, match="larger than"):
        load_system(big)
    bad = tmp_path / "bad.yaml"
    bad.write_bytes(b"devices: \xff\xfe")
    with pytest.raises(HardwareError, match="not a text"):
        load_system(bad)


def test_link_hops_and_transfer() -> None:
    ring = Link(10.0, 100.0, "ring")
    assert [ring.hops(0, j, 8) for j in range(8)] == [0, 1, 2, 3, 4, 3, 2, 1]
    assert Link(10.0, 100.0, "switch").hops(3, 7, 8) == 1
    assert ring.transfer_ns(1000, 2) == pytest.approx(2 * 100 + 100)


def _group(kern, n: int) -> SystemProgram:
    return SystemProgram((Group(tuple(range(n)), kern.program),))


@pytest.mark.parametrize("algo", ["one_shot", "two_shot"])
@pytest.mark.parametrize("n", [1, 3, 4])
def test_all_reduce_executes_and_is_timed(algo: str, n: int) -> None:
    s = system(n)
    k = all_reduce(n, 10, algo)
    sp = _group(k, n)
    rng = np.random.default_rng(n)
    xs = {d: rng.standard_normal(10).astype(np.float32) for d in range(n)}
    mems = {d: DeviceMemory(s.device) for d in range(n)}
    out = execute_system(sp, s, mems, {d: k.bind({"x": xs[d]}) for d in range(n)})
    want = sum(xs.values())
    for d in range(n):
        np.testing.assert_allclose(out[d]["y"][:10], want, rtol=1e-5)
    res = simulate_system(sp, s)
    est = collective_ns("all_reduce", n, 10, s.link, s.device, algo)
    assert res.latency_ns == pytest.approx(est, rel=1e-9)
    assert (res.comm_ns > 0) == (n > 1)
    assert res.comm_share <= 1.0


def test_all_gather_ring_timing() -> None:
    n, size = 6, 1000
    s = system(n, "ring", bw=4.0, lat=10.0)
    k = all_gather(n, size)
    res = simulate_system(_group(k, n), s)
    # right port: peers 1, 2, 3 (1 + 2 + 3 link crossings); left port: peers 4, 5 (2 + 1)
    busy = 4 * size / 4.0
    assert res.latency_ns == pytest.approx(6 * busy + 3 * 10.0)
    assert res.groups[0].link["bytes"] == 5 * 4 * size
    out = execute_system(_group(k, n), s, {d: DeviceMemory(s.device) for d in range(n)},
                         {d: {"x": np.full(size, d, np.float32)} for d in range(n)})
    np.testing.assert_array_equal(out[2]["y"].reshape(n, size)[:, 0], np.arange(n))


def _pipeline() -> SystemProgram:
    """Two single-device groups: g0 doubles x and sends it to g1, which adds one."""
    a = Program((Stream("host", "host", (), (HostOp("add", (BufRef("h", 0, (4,)),),
                                                    (BufRef("x", 0, (4,)),
                                                     BufRef("x", 0, (4,)))),
                                             Signal("h_ready"))),
                 Stream("link", "link", (), (Wait(("h_ready",)),
                                             Send(BufRef("h", 0, (4,)), BufRef("r", 0, (4,)),
                                                  aff(0, dev=1), 1),
                                             Signal("hop")))),
                (Buffer("x", "fp32", 4), Buffer("h", "fp32", 4)))
    b = Program((Stream("host", "host", (), (Wait(("hop",)),
                                             HostOp("add", (BufRef("y", 0, (4,)),),
                                                    (BufRef("r", 0, (4,)),
                                                     BufRef("one", 0, (4,)))))),),
                (Buffer("r", "fp32", 4), Buffer("one", "fp32", 4), Buffer("y", "fp32", 4)))
    return SystemProgram((Group((0,), a), Group((1,), b)))


def test_pipeline_hop_between_groups() -> None:
    s = system(2, bw=1.0, lat=50.0)
    sp = _pipeline()
    assert SystemProgram.from_json(sp.to_json()) == sp
    out = execute_system(sp, s, {0: DeviceMemory(s.device), 1: DeviceMemory(s.device)},
                         {0: {"x": np.arange(4)}, 1: {"one": np.ones(4)}})
    np.testing.assert_array_equal(out[1]["y"], 2 * np.arange(4) + 1)
    res = simulate_system(sp, s)
    ov = s.device.host.op_overhead_ns
    add = ov + 48 / s.device.host.bandwidth_gbps
    assert res.latency_ns == pytest.approx(add + 16 / 1.0 + 50.0 + add)
    assert res.comm_ns == pytest.approx(16 + 50.0)
    assert "g1.host" not in res.groups[0].stream_end_ns


def test_system_program_rules() -> None:
    s = system(2)
    sp = _pipeline()
    with pytest.raises(ProgramError, match="device 5 outside"):
        validate_system(SystemProgram((Group((5,), sp.groups[0].program),)), s)
    with pytest.raises(ProgramError, match="device 0 already runs group 0"):
        validate_system(SystemProgram((sp.groups[0], Group((0,), sp.groups[1].program))), s)
    with pytest.raises(ProgramError, match="send to group 1: the system program has 0"):
        simulate(sp.groups[0].program, s.device)
    bad = Program((Stream("host", "host", (), (Send(BufRef("x", 0, (4,)),
                                                    BufRef("x", 0, (4,)), aff(0)),)),),
                  (Buffer("x", "fp32", 4),))
    with pytest.raises(ProgramError, match="sends run only in link streams"):
        simulate(bad, s.device)
    wide = Program((Stream("link", "link", (), (Send(BufRef("x", 0, (4,)),
                                                     BufRef("x", aff(0, dev=8), (4,)),
                                                     aff(0)),)),),
                   (Buffer("x", "fp32", 8),))
    with pytest.raises(ProgramError, match="dst window"):
        validate_system(SystemProgram((Group((0, 1), wide),)), s)
