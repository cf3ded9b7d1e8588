"""The output layer (``sim.writes``): regular files or new paths only, never through a
symlink or over a device or FIFO, the replaced file's mode kept, atomic."""

from __future__ import annotations

import os
import stat

import pytest

from sim.writes import OutputError, append_line, write_atomic


def test_a_new_file_gets_the_umask_mode_and_nothing_else_is_left(tmp_path) -> None:
    old = os.umask(0o027)
    try:
        write_atomic(tmp_path / "new.json", "{}\n")
    finally:
        os.umask(old)
    assert (tmp_path / "new.json").read_text() == "{}\n"
    assert stat.S_IMODE((tmp_path / "new.json").stat().st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new.json"]


def test_a_replaced_file_keeps_its_mode(tmp_path) -> None:
    p = tmp_path / "prog.json"
    p.write_text("old")
    p.chmod(0o644)
    write_atomic(p, b"new")
    assert p.read_bytes() == b"new" and stat.S_IMODE(p.stat().st_mode) == 0o644
    p.chmod(0o600)
    write_atomic(p, lambda tmp: tmp.write_text("newer"))
    assert p.read_text() == "newer" and stat.S_IMODE(p.stat().st_mode) == 0o600


def test_never_through_a_symlink(tmp_path) -> None:
    target, link = tmp_path / "target", tmp_path / "link"
    target.write_text("kept")
    link.symlink_to(target)
    for write in (lambda: write_atomic(link, "x"), lambda: append_line(link, "x")):
        with pytest.raises(OutputError, match="is a symlink"):
            write()
    assert link.is_symlink() and target.read_text() == "kept"


def test_never_over_a_fifo_or_a_folder(tmp_path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(OutputError, match="is a FIFO"):
        write_atomic(fifo, "x")
    with pytest.raises(OutputError, match="is a folder"):
        write_atomic(tmp_path, "x")
    with pytest.raises(OutputError, match="folder .* does not exist"):
        write_atomic(tmp_path / "no" / "x.json", "x")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fifo"]


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path) -> None:
    p = tmp_path / "report.json"
    p.write_text("old")

    def fails(tmp) -> None:
        tmp.write_text("half")
        raise OSError(28, "No space left on device")

    with pytest.raises(OutputError, match="No space left on device.*unchanged"):
        write_atomic(p, fails)
    assert p.read_text() == "old" and [q.name for q in tmp_path.iterdir()] == ["report.json"]


def test_append_line_adds_whole_lines(tmp_path) -> None:
    p = tmp_path / "history.jsonl"
    append_line(p, '{"a": 1}')
    append_line(p, '{"a": 2}\n')
    assert p.read_text() == '{"a": 1}\n{"a": 2}\n'
