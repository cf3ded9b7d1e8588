"""Hostile hardware files: numbers no device could have, alias bombs in a field, system
files whose ``device`` leads back to themselves. Each is one HardwareError naming the
field, at once."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from sim.errors import HardwareError
from sim.hwio import PRESET_DIR, load_hardware
from sim.system import load_system

REPO = Path(__file__).resolve().parents[2]


def _file(tmp_path, section: str, field: str, value) -> Path:
    d = load_hardware("hbm-pim").to_dict()
    d[section][field] = value
    p = tmp_path / "dev.yaml"
    p.write_text(yaml.safe_dump(d))
    return p


@pytest.mark.parametrize("section, field, value, needle", [
    ("org", "tck_ns", 1e-300, "'org.tck_ns' must be >= 0.1 (allowed: 0.1 to 100;"),
    ("org", "rows_per_bank", 1, "'org.rows_per_bank' must be >= 16 (allowed: 16 to 4,194,304;"),
    ("pim", "clock_mhz", 1e-9, "'pim.clock_mhz' must be >= 10 (allowed: 10 to 100,000;"),
    ("bus", "data_rate_gbps", 1e-12, "'bus.data_rate_gbps' must be >= 0.1"),
    ("host", "peak_gflops", 1e-200, "'host.peak_gflops' must be >= 0.1"),
    ("org", "channels", 0, "'org.channels' must be > 0 (allowed: 1 to 1,024)"),
])
def test_numbers_no_device_could_have_are_refused_naming_field_and_range(
        tmp_path, section, field, value, needle) -> None:
    with pytest.raises(HardwareError, match="no real device|allowed") as e:
        load_hardware(_file(tmp_path, section, field, value))
    assert needle in str(e.value)


def test_every_shipped_preset_and_experiment_device_is_valid() -> None:
    files = sorted(PRESET_DIR.glob("*.yaml")) + sorted((REPO / "experiments/hw").glob("*.yaml"))
    assert len(files) >= 5
    for f in files:
        assert load_system(f).device.org.rows_per_bank >= 16


def test_an_alias_bomb_in_a_field_value_is_refused_at_once_unexpanded(tmp_path) -> None:
    text = (PRESET_DIR / "hbm-pim.yaml").read_text()
    anchors = ['&x0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    anchors += [f"&x{i} [" + ", ".join([f"*x{i - 1}"] * 9) + "]" for i in range(1, 10)]
    lines = [("name: [" + ", ".join(anchors) + "]") if ln.startswith("name:") else ln
             for ln in text.splitlines()]
    p = tmp_path / "bomb.yaml"
    p.write_text("\n".join(lines) + "\n")
    # a separate process: before this was refused, the message expanded 9**10 strings
    res = subprocess.run([sys.executable, "-c", "import sys; from sim.hwio import "
                          "load_hardware; load_hardware(sys.argv[1])", str(p)],
                         capture_output=True, text=True, timeout=60, cwd=REPO)
    err = res.stderr.strip().splitlines()[-1]
    assert "HardwareError" in err and "alias *'x0'" in err and "lol" not in err


def test_a_system_whose_device_names_itself_is_one_line(tmp_path) -> None:
    me = tmp_path / "me.yaml"
    me.write_text("name: me\ndevice: me.yaml\ndevices: 1\n")
    with pytest.raises(HardwareError, match="'device' names the system file itself"):
        load_hardware(me)


def test_two_systems_naming_each_other_are_one_line(tmp_path) -> None:
    (tmp_path / "a.yaml").write_text("name: a\ndevice: b.yaml\ndevices: 2\n"
                                     "link: {bandwidth_gbps: 10, latency_ns: 5, topology: ring}\n")
    (tmp_path / "b.yaml").write_text("name: b\ndevice: a.yaml\ndevices: 1\n")
    for f in ("a.yaml", "b.yaml"):
        with pytest.raises(HardwareError, match="is a system, not one device"):
            load_system(tmp_path / f)


def test_a_device_path_cannot_leave_the_system_files_folder(tmp_path) -> None:
    (tmp_path / "dev.yaml").write_text(yaml.safe_dump(load_hardware("aim-gddr6").to_dict()))
    inner = tmp_path / "systems"
    inner.mkdir()
    (inner / "s.yaml").write_text("name: s\ndevice: ../dev.yaml\ndevices: 1\n")
    with pytest.raises(HardwareError, match="outside the folder"):
        load_system(inner / "s.yaml")
