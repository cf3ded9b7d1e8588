"""Hardware loading: presets, derived figures, fingerprint, and every validation rule."""

from __future__ import annotations

import copy

import pytest
import yaml

from sim.errors import HardwareError
from sim.hwio import list_presets, load_hardware


def base() -> dict:
    return copy.deepcopy(load_hardware("hbm-pim").to_dict())


def test_presets_load_and_derive() -> None:
    assert list_presets() == ["aim-gddr6", "aim-gddr6-x16", "hbm-pim", "hbm-pim-x16"]
    hbm = load_hardware("hbm-pim")
    # 64 pCH x 64-bit x 2 Gbps / 8 = 1024 GB/s; 512 units x 16 lanes x 2 x 0.3 GHz
    assert hbm.external_bandwidth_gbps == pytest.approx(1024.0)
    assert hbm.pim_peak_gflops == pytest.approx(4915.2)
    # one all-bank column op per tCCD_L = 4 ns moves 8 units x 32 B: 4x the bus
    assert hbm.internal_bandwidth_gbps == pytest.approx(4 * 1024.0)
    aim = load_hardware("aim-gddr6")
    # 1 TFLOPS per 2-channel die (HARDWARE.md), 16 dies
    assert aim.pim_peak_gflops / 16 == pytest.approx(1024.0)
    # 512 GB/s internal per channel (HARDWARE.md)
    assert aim.internal_bandwidth_gbps / aim.org.channels == pytest.approx(512.0)
    assert aim.capacity_bytes == 32 * 16 * 16384 * 2048


def test_fingerprint_stable_and_sensitive(tmp_path) -> None:
    d = base()
    p = tmp_path / "mine.yaml"
    d["name"] = "renamed"
    p.write_text(yaml.safe_dump(d))
    same = load_hardware(p)
    assert same.fingerprint == load_hardware("hbm-pim").fingerprint  # name is not physics
    d["timing"]["trcd"] = 15
    assert load_hardware(d).fingerprint != same.fingerprint
    assert load_hardware(same) is same
    assert hash(same) == hash(load_hardware(p))


def test_unknown_name() -> None:
    with pytest.raises(HardwareError, match="unknown hardware 'nope'.*hbm-pim"):
        load_hardware("nope")


def test_bad_yaml(tmp_path) -> None:
    p = tmp_path / "bad.yaml"
    p.write_text("name: [unclosed")
    with pytest.raises(HardwareError, match="bad.yaml: not valid YAML"):
        load_hardware(p)


def mutate(path: list[str], value: object) -> dict:
    d = base()
    node = d
    for k in path[:-1]:
        node = node[k]
    if value is _DELETE:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return d


_DELETE = object()

RULES = [
    (["timing", "trcd"], _DELETE, "'timing.trcd' is missing"),
    (["org"], _DELETE, "'org' is missing"),
    (["timing", "tbogus"], 3, "'timing.tbogus' is unknown"),
    (["extra"], 1, "'extra' is unknown"),
    (["org", "channels"], "64", "'org.channels' must be an integer"),
    (["org", "channels"], 2.5, "'org.channels' must be an integer"),
    (["org", "channels"], True, "'org.channels' must be an integer"),
    (["org", "tck_ns"], "fast", "'org.tck_ns' must be a number"),
    (["org", "channels"], 0, "'org.channels' must be > 0"),
    (["timing", "trp"], -1, "'timing.trp' must be > 0"),
    (["energy", "mac_pj"], -0.1, "'energy.mac_pj' must be >= 0"),
    (["pim", "adder_tree"], "yes", "'pim.adder_tree' must be true or false"),
    (["pim", "activation_functions"], "relu", "must be a list of strings"),
    (["pim", "activation_functions"], ["swish"], "unknown function 'swish'"),
    (["org", "bank_groups"], 3, "'org.bank_groups' must divide org.banks_per_channel"),
    (["org", "row_bytes"], 1000, "'org.row_bytes' must be a multiple of org.column_bytes"),
    (["pim", "banks_per_unit"], 3, "'pim.banks_per_unit' must divide"),
    (["pim", "dtype"], "int8", "'pim.dtype' must be one of"),
    (["pim", "dtype"], "fp32", "'pim.dtype' must be a 16-bit type"),
    (["pim", "accum_dtype"], "fp64", "'pim.accum_dtype' must be one of"),
    (["host", "dtype"], "int4", "'host.dtype' must be one of"),
    (["pim", "lanes"], 8, "'pim.lanes' must equal the elements in one column"),
    (["pim", "register_lanes"], 12, "'pim.register_lanes' must be a multiple or divisor"),
    (["pim", "global_buffer_bytes"], 100, "must be a multiple of org.column_bytes"),
    (["timing", "tras"], 10, "'timing.tras' must be >= timing.trcd"),
    (["timing", "tccd_l"], 1, "long \\(same group\\) timings"),
    (["timing", "trefi"], 300, "'timing.trefi' must exceed timing.trfc"),
    (["timing"], [1, 2], "'timing' must be a mapping"),
    (["description"], 5, "'description' must be a string"),
]


@pytest.mark.parametrize(("path", "value", "message"), RULES, ids=[r[2][:40] for r in RULES])
def test_validation_rule(tmp_path, path, value, message) -> None:
    p = tmp_path / "dev.yaml"
    p.write_text(yaml.safe_dump(mutate(path, value)))
    with pytest.raises(HardwareError, match=message) as err:
        load_hardware(p)
    assert str(p) in str(err.value)  # the message names the file


def test_not_a_mapping(tmp_path) -> None:
    p = tmp_path / "list.yaml"
    p.write_text("- 1\n- 2\n")
    with pytest.raises(HardwareError, match="must be a mapping of sections"):
        load_hardware(p)


@pytest.mark.parametrize(("path", "value", "message"), [
    (["org", "channels"], 1_000_000_000_000, "'org.channels' must be <= 1,024"),
    (["org", "channels"], 10**400, "'org.channels' must be <= 1,024"),
    (["org", "rows_per_bank"], 1 << 30, "'org.rows_per_bank' must be <= 4,194,304"),
    (["timing", "trefi"], 10**9, "'timing.trefi' must be <= 10,000,000"),
    (["org", "tck_ns"], float("inf"), "'org.tck_ns' must be a finite number"),
    (["energy", "mac_pj"], float("nan"), "'energy.mac_pj' must be a finite number"),
    (["pim", "global_buffer_bytes"], 1 << 30, "'pim.global_buffer_bytes' must be <="),
], ids=["channels", "huge-int", "rows", "trefi", "inf", "nan", "buffer"])
def test_sizes_are_bounded_by_real_devices(tmp_path, path, value, message) -> None:
    p = tmp_path / "dev.yaml"
    p.write_text(yaml.safe_dump(mutate(path, value)))
    with pytest.raises(HardwareError, match=message):
        load_hardware(p)


def test_the_capacity_of_one_device_is_bounded(tmp_path) -> None:
    d = mutate(["org", "channels"], 1024)
    d["org"]["rows_per_bank"] = 1 << 22
    d["org"]["row_bytes"] = 1 << 16
    with pytest.raises(HardwareError, match="a device holds at most"):
        load_hardware(d)


def test_a_large_file_is_refused_before_parsing(tmp_path) -> None:
    p = tmp_path / "big.yaml"
    p.write_text("name: x\n" + "#" * 2_000_000 + "\n")
    with pytest.raises(HardwareError, match="larger than 1,000,000 bytes"):
        load_hardware(p)
    p.write_bytes(b"\xff\xfe name")
    with pytest.raises(HardwareError, match="not a text"):
        load_hardware(p)
