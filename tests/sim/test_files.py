"""The input layer (``sim.files``): regular files only, size and depth limits, YAML aliases
refused unexpanded, JSON numbers finite and bounded, names confined to their folder."""

from __future__ import annotations

import os
import time

import pytest

from sim.files import (
    MAX_DEPTH,
    InputError,
    confined,
    json_depth,
    load_json,
    load_yaml,
    parse_json,
    read_bytes,
)


def test_only_regular_files_are_read_and_none_blocks(tmp_path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # no writer: an open that blocked would hang here
    for path, kind in ((fifo, "a FIFO"), (tmp_path, "a folder"), ("/dev/zero", "a device")):
        with pytest.raises(InputError, match=f"is {kind}; a file is a regular file"):
            read_bytes(path, limit=100)
    with pytest.raises(InputError, match="no such file"):
        read_bytes(tmp_path / "missing", limit=100)


def test_a_file_over_its_limit_is_not_read(tmp_path) -> None:
    p = tmp_path / "big.yaml"
    p.write_text("a: 1\n" * 100)
    with pytest.raises(InputError, match="larger than 10 bytes .500.*not parsed"):
        load_yaml(p, limit=10)
    assert load_yaml(p, limit=1000) == {"a": 1}


def _bomb(levels: int = 9) -> str:
    rows = ['x0: &x0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    rows += [f"x{i}: &x{i} [" + ", ".join([f"*x{i - 1}"] * 9) + "]" for i in range(1, levels)]
    return "\n".join(rows) + f"\nname: *x{levels - 1}\n"


def test_a_yaml_alias_is_refused_and_never_expanded(tmp_path) -> None:
    p = tmp_path / "bomb.yaml"
    p.write_text(_bomb())
    t0 = time.monotonic()
    with pytest.raises(InputError) as e:
        load_yaml(p, limit=1 << 20)
    assert time.monotonic() - t0 < 1
    assert "alias *'x0'" in str(e.value) and "lol" not in str(e.value)
    p.write_text("a: &anchor 1\nb: 2\n")  # an anchor alone expands nothing
    assert load_yaml(p, limit=100) == {"a": 1, "b": 2}


@pytest.mark.parametrize("text", ["a: " + "[" * 200 + "]" * 200,
                                  "a:\n" + "".join("  " * i + f"k{i}:\n" for i in range(1, 80))])
def test_yaml_nested_too_deep_is_refused(tmp_path, text) -> None:
    p = tmp_path / "deep.yaml"
    p.write_text(text)
    with pytest.raises(InputError, match=f"nested deeper than {MAX_DEPTH} levels"):
        load_yaml(p, limit=1 << 20)


def test_json_nested_100000_deep_is_refused_without_recursion(tmp_path) -> None:
    p = tmp_path / "deep.json"
    p.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(InputError, match="nested deeper than 64 levels"):
        load_json(p, limit=1 << 20)
    assert json_depth('{"a": "[[[{{", "b": [[1]]}') == 3  # brackets in strings do not count


@pytest.mark.parametrize("text, needle", [
    ('{"factor": NaN}', "NaN is not a JSON number"),
    ('{"factor": -Infinity}', "-Infinity is not a JSON number"),
    ('{"factor": 1e999}', "beyond the float range"),
    ('{"n": ' + "9" * 30 + "}", "integer of 30 digits"),
    ('{"n": 1', "not valid JSON"),
])
def test_json_numbers_are_finite_and_bounded(text, needle) -> None:
    with pytest.raises(InputError, match=needle):
        parse_json(text, source="x.json")


def test_nan_is_read_only_where_a_file_says_a_figure_is_missing() -> None:
    assert parse_json('{"a": NaN}', source="x", nan=True)["a"] != 0
    with pytest.raises(InputError, match="Infinity"):
        parse_json('{"a": Infinity}', source="x", nan=True)


@pytest.mark.parametrize("name", ["../x.pt", "/etc/passwd", "a/../../b", "", "a\\..\\b"])
def test_names_cannot_leave_their_folder(tmp_path, name) -> None:
    with pytest.raises(InputError):
        confined(tmp_path, name)


def test_names_inside_the_folder_are_joined(tmp_path) -> None:
    assert confined(tmp_path, "shards/model-1.safetensors") == \
        tmp_path / "shards" / "model-1.safetensors"
